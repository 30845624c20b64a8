# SPDX-License-Identifier: LGPL-2.1-or-later
"""What LSM mediation costs per message, on dbus-daemon and on bus1-broker,
in the guest (a bench, not a test: ninja -C BUILD lsm-bench, selinux-bench).

  bench_lsm.py apparmor BUS1_BROKER BENCH_DBUS SHIM [COUNT] [REPEAT]
  bench_lsm.py selinux BUS1_BROKER BENCH_DBUS [COUNT] [REPEAT]

bench-dbus (bench/) serves Echo under one label and calls it COUNT times
(default 2000) under another, the policy allowing exactly that. Each bus
runs with its mediation on and off; the four combinations run in turn,
REPEAT times (default 5), rotating the order. Printed: median calls/s and
bus CPU per call with their spread, and the on/off ratios paired per
repetition.

- apparmor: on is <apparmor mode="required"/>, off mode="disabled". A call
  costs two label queries (the caller's send, the service's receive; the
  reply is a requested one). The dbus flag and the labels are supplied as
  for apparmor_matrix.py.
- selinux (a guest booted with security=selinux): on is the bus in bus_t
  with selinux_matrix.py's policy loaded, off the same bus in a mount
  namespace without selinuxfs, where libselinux says SELinux is disabled.
  A call costs two cache lookups (the call's send_msg and the reply's).
"""

import os
import shutil
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import apparmor_matrix as am  # noqa: E402
import selinux_matrix as sm  # noqa: E402

# How each LSM starts the bus, the service and the caller, on and off.
NO_SELINUXFS = ["unshare", "-m", "sh", "-c", 'umount /sys/fs/selinux && exec "$@"', "sh"]


def labels(lsm, on):
    """(bus wrapper, service wrapper, caller wrapper, <apparmor> mode)."""
    if lsm == "apparmor":
        return ([], am.aa_exec("bus1test-bench-svc"), am.aa_exec("bus1test-bench-client"),
                "required" if on else "disabled")
    bus = ["runcon", sm.ctx("bus_t")] + ([] if on else NO_SELINUXFS)
    return bus, ["runcon", sm.ctx("svc_t")], ["runcon", sm.ctx("client_t")], None


def run_one(lsm, argv, on, bench, env, count, work, tag):
    bus_dir = os.path.join(work, "bench-%s" % tag)
    os.makedirs(bus_dir)
    bus_wrap, svc_wrap, cli_wrap, mode = labels(lsm, on)
    conf = am.write_config(bus_dir, mode) if mode else sm.write_config(bus_dir)
    bus = subprocess.Popen(bus_wrap + argv + ["--config-file=" + conf, "--nofork",
                                              "--print-address=1"],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                           env=dict(os.environ, **env))
    svc = None
    try:
        address = bus.stdout.readline().strip()
        svc = subprocess.Popen(svc_wrap + [bench, "serve", address], stdout=subprocess.PIPE,
                               text=True)
        if not svc.stdout.readline().startswith("ready"):
            raise RuntimeError("bench-dbus serve did not start on %s" % argv[0])
        out = subprocess.run(cli_wrap + [bench, "--pid", str(bus.pid), "calls", address, "0",
                                         str(count)],
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
    lsm, broker, bench = sys.argv[1:4]
    rest = sys.argv[4:]
    env = {}
    if lsm == "apparmor":
        env = {"LD_PRELOAD": rest.pop(0)}
        work = am.WORK
        shutil.rmtree(work, ignore_errors=True)
        os.makedirs(work, mode=0o755)
        am.load_profiles()
        am.supply_flag()
    else:
        work = sm.WORK
        shutil.rmtree(work, ignore_errors=True)
        os.makedirs(work, mode=0o755)
        if not os.path.exists(os.path.join(sm.SELINUXFS, "load")):
            subprocess.run(["mount", "-t", "selinuxfs", "selinuxfs", sm.SELINUXFS], check=True)
        sm.selinux_config()
        sm.load_policy()
        sm.set_enforcing(True)
    count = int(rest[0]) if rest else 2000
    repeat = int(rest[1]) if len(rest) > 1 else 5

    combos = [(name, argv, on) for name, argv in (("dbus-daemon", [am.DAEMON]),
                                                  ("bus1-broker", [broker]))
              for on in (True, False)]
    res = {(n, on): [] for n, _, on in combos}
    for rep in range(repeat):
        order = combos[rep % len(combos):] + combos[:rep % len(combos)]
        for name, argv, on in order:
            res[(name, on)].append(run_one(lsm, argv, on, bench, env, count, work,
                                           "%s-%s-%d" % (name, on, rep)))
    if lsm == "apparmor":
        am.remove_flag()

    def med(v):
        return statistics.median(v), (max(v) - min(v)) / 2

    print("# %s cost per call: %d Echo calls, %d repetitions, caller and service labelled"
          % (lsm, count, repeat))
    print("%-12s %-5s %12s %8s %16s %8s" % ("bus", "LSM", "calls/s", "+-", "bus CPU us/call",
                                          "+-"))
    for name, _, on in combos:
        rates = [r for r, _ in res[(name, on)]]
        cpus = [c / 1000 for _, c in res[(name, on)]]
        print("%-12s %-5s %12.0f %8.0f %16.2f %8.2f" % ((name, "on" if on else "off") +
                                                        med(rates) + med(cpus)))
    for name in ("dbus-daemon", "bus1-broker"):
        on, off = res[(name, True)], res[(name, False)]
        rate = [a[0] / b[0] for a, b in zip(on, off)]
        cpu = [a[1] - b[1] for a, b in zip(on, off)]
        print("# %s: on/off calls/s %.2f (paired, spread %.2f-%.2f); mediation adds %.2f us of "
              "bus CPU per call" % (name, statistics.median(rate), min(rate), max(rate),
                                    statistics.median(cpu) / 1000))
    b1 = [a[0] / b[0] for a, b in zip(res[("bus1-broker", True)], res[("dbus-daemon", True)])]
    print("# mediation on: bus1-broker/dbus-daemon calls/s %.2f (paired, spread %.2f-%.2f)"
          % (statistics.median(b1), min(b1), max(b1)))


if __name__ == "__main__":
    main()
