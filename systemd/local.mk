# systemd units.
