"""crc32c (Castagnoli, reflected polynomial 0x82F63B78): the checksum btrfs
stores in bytes 0..3 of a superblock or tree block with csum_type crc32c,
computed over the bytes from offset 32 on.  For the tests that patch
images; slow (a byte at a time) but small blocks only."""


def _table():
    t = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        t.append(c)
    return t


TABLE = _table()


def crc32c(data):
    c = 0xFFFFFFFF
    for x in data:
        c = TABLE[(c ^ x) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def seal(block):
    """Store the crc32c of a tree block or superblock (a bytearray) in its
    checksum field: 4 bytes little-endian, the other 28 zero."""
    block[0:32] = crc32c(bytes(block[32:])).to_bytes(4, "little") + bytes(28)


assert crc32c(b"123456789") == 0xE3069283
