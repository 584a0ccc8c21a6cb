#!/usr/bin/env python3
"""Hot-loop instruction counts of x86 kernels, from `objdump -d` of an object file (the x86 twin of
neon-loop-stats.py). For each function whose demangled name contains FUNCTION-SUBSTRING, finds the loop (a
backward branch) densest in FMAs and prints: total instructions, vfmadd, vector loads/broadcasts,
stores, stack accesses (spills: (%rsp) / (%rbp)) and register moves (vmovaps between registers).
Usage: x86-loop-stats.py OBJ [FUNCTION-SUBSTRING]
"""
import re
import sys

from objdump_funcs import functions

obj = sys.argv[1]
want = sys.argv[2] if len(sys.argv) > 2 else ""
funcs = functions(obj)

for name, ins in funcs.items():
    if want not in name:
        continue
    best = None
    for addr, op, args in ins:
        t = re.match(r"([0-9a-f]+) <", args)
        if op.startswith("j") and t and int(t.group(1), 16) <= addr:
            body = [x for x in ins if int(t.group(1), 16) <= x[0] <= addr]
            fma = sum(1 for x in body if x[1].startswith("vfmadd"))
            if fma and (best is None or fma / len(body) > best[0] / len(best[1])):
                best = (fma, body)
    if not best or not best[0]:
        continue
    body = best[1]
    count = lambda f: sum(1 for x in body if f(x[1], x[2]))
    loads = count(lambda o, a: (o.startswith("vmov") or o.startswith("vbroadcast") or o.startswith("vmaskmov"))
                  and "(" in a and not a.endswith(")"))
    stores = count(lambda o, a: o.startswith("vmov") and a.endswith(")"))
    stack = count(lambda o, a: "(%rsp" in a or "(%rbp" in a)
    moves = count(lambda o, a: o in ("vmovaps", "vmovups") and "(" not in a)
    short = re.sub(r"\(unsigned long.*", "", name).replace("(anonymous namespace)::", "")
    print(f"{short[:110]}: {len(body)} insns, {best[0]} vfmadd, {loads} loads, {stores} stores, "
          f"{stack} stack, {moves} reg moves")
