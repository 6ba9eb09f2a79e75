# Overwrites every element of one BF16 tensor of a safetensors file with the given bit pattern
# (hex), in place: a test model whose weights are finite but make its logits overflow.
#   python3 fill_bf16_tensor.py FILE TENSOR 0x7f7f
import json
import struct
import sys

path, name, bits = sys.argv[1], sys.argv[2], int(sys.argv[3], 16)
with open(path, "r+b") as f:
    (header_len,) = struct.unpack("<Q", f.read(8))
    header = json.loads(f.read(header_len))
    entry = header[name]
    assert entry["dtype"] == "BF16", entry
    begin, end = entry["data_offsets"]
    f.seek(8 + header_len + begin)
    f.write(struct.pack("<H", bits) * ((end - begin) // 2))
