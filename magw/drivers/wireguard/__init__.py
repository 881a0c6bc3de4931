"""The WireGuard cable's driver: keys, the device (kernel or wireguard-go) and its peers, through the ``wg`` tool."""
