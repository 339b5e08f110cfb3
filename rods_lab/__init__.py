"""The lab around the library: the `rods` command and the app's services. These are the composition roots
that join `rods_core` (the library) to `storage` and `bench`; nothing in `rods_core` imports them."""
