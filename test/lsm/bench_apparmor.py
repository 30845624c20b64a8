# SPDX-License-Identifier: LGPL-2.1-or-later
"""What AppArmor mediation costs per message, on dbus-daemon and on
bus1-broker, in the guest (a bench, not a test: ninja -C BUILD lsm-bench).

  bench_apparmor.py BUS1_BROKER SHIM BENCH_DBUS [COUNT] [REPEAT]

bench-dbus (bench/) serves Echo under one profile and calls it COUNT times
(default 2000) under another, the two labels' dbus rules allowing exactly
that. Each bus runs with <apparmor mode="enabled"/> (two label queries per
call: the caller's send and the service's receive; the reply is a requested
one) and with mode="disabled"; the four combinations run in turn, REPEAT
times (default 5), rotating the order. Printed: median calls/s and bus CPU
per call with their spread, and the on/off ratios paired per repetition.
The dbus flag and the labels are supplied as for apparmor_matrix.py.
"""

import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import apparmor_matrix as am  # noqa: E402


def run_one(argv, mode, bench, shim, count, tag):
    bus_dir = os.path.join(am.WORK, "bench-%s" % tag)
    os.makedirs(bus_dir)
    conf = am.write_config(bus_dir, mode)
    bus = subprocess.Popen(argv + ["--config-file=" + conf, "--nofork", "--print-address=1"],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                           env=dict(os.environ, LD_PRELOAD=shim))
    svc = None
    try:
        address = bus.stdout.readline().strip()
        svc = subprocess.Popen(["aa-exec", "-p", "bus1test-bench-svc", "--", bench, "serve",
                                address], stdout=subprocess.PIPE, text=True)
        if not svc.stdout.readline().startswith("ready"):
            raise RuntimeError("bench-dbus serve did not start on %s" % argv[0])
        out = subprocess.run(["aa-exec", "-p", "bus1test-bench-client", "--", bench,
                              "--pid", str(bus.pid), "calls", address, "0", str(count)],
                             stdout=subprocess.PIPE, text=True, check=True).stdout
        kv = dict(f.split("=", 1) for f in out.split() if "=" in f)
        return float(kv["rate"]), float(kv["bus_cpu_ns"]) / count
    finally:
        if svc:
            svc.kill()
            svc.wait()
        bus.terminate()
        bus.wait(10)


def main():
    broker, shim, bench = sys.argv[1:4]
    count = int(sys.argv[4]) if len(sys.argv) > 4 else 2000
    repeat = int(sys.argv[5]) if len(sys.argv) > 5 else 5
    subprocess.run(["rm", "-rf", am.WORK], check=True)
    os.makedirs(am.WORK, mode=0o755)
    am.load_profiles()
    am.supply_flag()
    combos = [(name, argv, mode) for name, argv in (("dbus-daemon", [am.DAEMON]),
                                                    ("bus1-broker", [broker]))
              for mode in ("enabled", "disabled")]
    res = {(n, m): [] for n, _, m in combos}
    for rep in range(repeat):
        order = combos[rep % len(combos):] + combos[:rep % len(combos)]
        for name, argv, mode in order:
            res[(name, mode)].append(run_one(argv, mode, bench, shim, count,
                                             "%s-%s-%d" % (name, mode, rep)))
    am.remove_flag()

    def med(v):
        return statistics.median(v), (max(v) - min(v)) / 2

    print("# AppArmor cost per call: %d Echo calls, %d repetitions, confined caller and "
          "service" % (count, repeat))
    print("%-12s %-9s %12s %8s %16s %8s" % ("bus", "mode", "calls/s", "+-", "bus CPU us/call",
                                          "+-"))
    for name, _, mode in combos:
        rates = [r for r, _ in res[(name, mode)]]
        cpus = [c / 1000 for _, c in res[(name, mode)]]
        print("%-12s %-9s %12.0f %8.0f %16.2f %8.2f" % ((name, mode) + med(rates) + med(cpus)))
    for name in ("dbus-daemon", "bus1-broker"):
        on, off = res[(name, "enabled")], res[(name, "disabled")]
        rate = [a[0] / b[0] for a, b in zip(on, off)]
        cpu = [a[1] - b[1] for a, b in zip(on, off)]
        print("# %s: on/off calls/s %.2f (paired, spread %.2f-%.2f); mediation adds %.2f us of "
              "bus CPU per call" % (name, statistics.median(rate), min(rate), max(rate),
                                    statistics.median(cpu) / 1000))
    b1 = [a[0] / b[0] for a, b in zip(res[("bus1-broker", "enabled")],
                                      res[("dbus-daemon", "enabled")])]
    print("# mediation on: bus1-broker/dbus-daemon calls/s %.2f (paired, spread %.2f-%.2f)"
          % (statistics.median(b1), min(b1), max(b1)))


if __name__ == "__main__":
    main()
