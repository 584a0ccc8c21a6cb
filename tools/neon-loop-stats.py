#!/usr/bin/env python3
"""Inner-loop instruction counts of cross-built NEON kernels, from `objdump -d` of an object file.

For each function, finds the loop (a backward branch) with the most FMA/dot instructions and prints
its instruction mix: total, FMLA/SDOT/UDOT/SMMLA..., vector loads (ldr q / ldp q / ld1*), stores, and
stack accesses (spills: [sp ...]). For a loop that stores q registers (an elementwise kernel: one
stored q register = 4 float results), it also prints the instructions per 4 elements and the mix of
operations. Usage: neon-loop-stats.py OBJ [FUNCTION-SUBSTRING] [-v] [--mac=OP,OP...]
--mac names the mnemonics that count as MACs (default: all below): an integer kernel whose requantization
loops hold more FMLA than its hot loop holds SMLAL (the depthwise kernel) needs --mac=smlal,smlal2.
"""
import re
import sys

from objdump_funcs import functions

args = [a for a in sys.argv[1:] if not a.startswith("-")]
obj = args[0]
want = args[1] if len(args) > 1 else ""
funcs = functions(obj, "aarch64-linux-gnu-objdump")

MAC = ("fmla", "sdot", "udot", "smmla", "ummla", "usmmla", "smlal", "smlal2", "umlal", "umlal2", "mla")
for a in sys.argv[1:]:
    if a.startswith("--mac="):
        MAC = tuple(a[len("--mac="):].split(","))
for name, ins in funcs.items():
    if want not in name:
        continue
    loops = []  # (start, end) of every backward branch
    for addr, op, args in ins:
        if op.startswith("b") or op.startswith("cb") or op.startswith("tb"):
            t = re.search(r"\b([0-9a-f]+) <", args)
            if t and int(t.group(1), 16) <= addr:
                loops.append((int(t.group(1), 16), addr))
    best = None
    for lo, hi in loops:
        if any(lo <= l2 and h2 <= hi and (l2, h2) != (lo, hi) for l2, h2 in loops):
            continue  # not innermost
        body = [x for x in ins if lo <= x[0] <= hi]
        macs = sum(1 for x in body if x[1] in MAC)
        spill = sum(1 for x in body if "[sp" in x[2])
        # the hottest innermost loop; among equals (the same loop inlined twice) the worst one
        if best is None or macs > best[0] or (macs == best[0] and spill > best[2]):
            best = (macs, body, spill)
    if not best or best[0] == 0:
        continue
    body = best[1]
    if "-v" in sys.argv:
        print("\n".join(f"  {op} {args}" for _, op, args in body))
    def count(pred):
        return sum(1 for x in body if pred(x))
    vload = count(lambda x: (x[1] in ("ldr", "ldp", "ldur") and re.match(r"[qd]\d", x[2])) or x[1].startswith("ld1"))
    vload_regs = sum((2 if x[1] == "ldp" else 1) if x[1] != "ld1" else x[2].count(".")
                     for x in body if (x[1] in ("ldr", "ldp", "ldur") and re.match(r"[qd]\d", x[2])) or x[1].startswith("ld1"))
    stores = count(lambda x: x[1].startswith("st"))
    spills = count(lambda x: "[sp" in x[2])
    short = re.sub(r"\((unsigned|long|int|float|char|void|signed|short|bool|nnkern::).*", "", name)
    short = short.replace("(anonymous namespace)::", "")
    print(f"{short}: loop {len(body)} insns, {best[0]} MAC-insns, {vload} vector-load insns ({vload_regs} regs), "
          f"{stores} stores, {spills} stack accesses, other {len(body) - best[0] - vload - stores}")
    stored_q = sum((2 if x[1] == "stp" else 1) if x[1] != "st1" else x[2].count(".")
                   for x in body if x[1].startswith("st") and re.match(r"\{?[qv]\d", x[2]))
    if stored_q and spills == 0:
        mix = {}
        for x in body:
            mix[x[1]] = mix.get(x[1], 0) + 1
        ops = ", ".join(f"{op} {n}" for op, n in sorted(mix.items(), key=lambda kv: (-kv[1], kv[0])))
        print(f"    {len(body) / stored_q:.2f} insns per 4 elements ({stored_q} q registers stored per iteration): {ops}")
