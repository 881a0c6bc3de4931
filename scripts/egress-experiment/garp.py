"""Send gratuitous ARP (request form) for IP from DEV, run inside a namespace."""
import socket, struct, sys, fcntl
dev, ip = sys.argv[1], sys.argv[2]
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind((dev, 0))
mac = s.getsockname()[4]
ipb = socket.inet_aton(ip)
frame = b"\xff" * 6 + mac + struct.pack("!H", 0x0806) + struct.pack("!HHBBH", 1, 0x0800, 6, 4, 1) + mac + ipb + b"\x00" * 6 + ipb
for _ in range(int(sys.argv[3]) if len(sys.argv) > 3 else 1):
    s.send(frame)
