# ibvctl, ibverbsd-run, and our ibv_devices/ibv_devinfo.
