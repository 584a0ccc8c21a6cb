"""The instructions of every function of an object file, from `objdump -d`: the parsing that
neon-loop-stats.py and x86-loop-stats.py share (they import it from their own folder)."""
import re
import subprocess


def functions(obj, objdump="objdump"):
    """{demangled function name: [(address, mnemonic, operands), ...]} in address order."""
    dis = subprocess.run([objdump, "-d", "--no-show-raw-insn", "-C", obj], capture_output=True, text=True,
                         check=True).stdout
    funcs, cur = {}, None
    for line in dis.splitlines():
        m = re.match(r"^[0-9a-f]+ <(.*)>:$", line)
        if m:
            cur = m.group(1)
            funcs[cur] = []
            continue
        m = re.match(r"^\s+([0-9a-f]+):\s+(\S+)\s*(.*)$", line)
        if m and cur:
            funcs[cur].append((int(m.group(1), 16), m.group(2), m.group(3)))
    return funcs
