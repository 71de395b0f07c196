# Man pages.
