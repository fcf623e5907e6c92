"""The `python-speed` template: make a Python function faster while a frozen check guards its results."""

MANIFEST = """\
# crucible manifest (python-speed template): make count_primes in slow.py faster.
# See docs/manifest.md for every key.

[repo]
path = "."                         # commit slow.py first: the workspace is a clone of the repository

[workspace]
dir = "workspace"                  # kept out of git by .gitignore, with state/
inject = ["measure.py"]            # the judge, frozen: the agent cannot edit its own gate

[agent]
backend = "local"                  # Claude Code on this host
goal = \"\"\"
Make count_primes in slow.py as fast as you can. It must return exactly the same results for
every input; measure.py checks that before timing it, and a wrong answer scores nothing.
Keep the function's name and signature. Standard library only.
\"\"\"

[judge]
measure_cmd = "python3 measure.py"
direction = "lower"
objective = "milliseconds"

# The gate's own test (`crucible check` runs it): the measure must score the code as it is
# (good_cmd changes nothing) better than a copy that does the work twice (bad_cmd).
[judge.selftest]
good_cmd = "true"
bad_cmd = '''printf '\\n_once = count_primes\\n\\n\\ndef count_primes(n):\\n    _once(n)\\n    return _once(n)\\n' >> slow.py'''
"""

SLOW = '''\
"""The function to speed up: counts the primes below n."""


def count_primes(n: int) -> int:
    count = 0
    for candidate in range(2, n):
        if all(candidate % d for d in range(2, int(candidate**0.5) + 1)):
            count += 1
    return count
'''

MEASURE = '''\
"""The judge: check count_primes is still correct, then time it; print one JSON line.

Correctness first: a fast wrong answer is invalid, never a win. The score is the best of
several timings in milliseconds (the least noisy summary of a short benchmark). The agent
may read this file in its workspace; it is re-copied before every measure, so an edit there
changes nothing that is measured.
"""

import json
import sys
import time

KNOWN = {0: 0, 2: 0, 3: 1, 10: 4, 100: 25, 1000: 168, 10000: 1229, 30000: 3245}
BENCH_N = 30000
REPEATS = 5


def report(**fields):
    print(json.dumps(fields))
    sys.exit(0)


sys.path.insert(0, ".")
try:
    from slow import count_primes
except Exception as exc:  # a candidate that does not import is invalid, not a crash
    report(valid=False, note=f"import failed: {type(exc).__name__}: {exc}")

for n, expected in KNOWN.items():
    try:
        got = count_primes(n)
    except Exception as exc:
        report(valid=False, note=f"count_primes({n}) raised {type(exc).__name__}: {exc}")
    if got != expected:
        report(valid=False, note=f"count_primes({n}) returned {got}, expected {expected}")

timings = []
for _ in range(REPEATS):
    start = time.perf_counter()
    count_primes(BENCH_N)
    timings.append((time.perf_counter() - start) * 1000.0)
best = min(timings)
report(valid=True, score=round(best, 3), note=f"best of {REPEATS}: {best:.1f} ms")
'''

FILES = {"crucible.toml": MANIFEST, "slow.py": SLOW, "measure.py": MEASURE}
