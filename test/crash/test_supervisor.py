#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The self-test of fdstore_supervisor.py, against a fake service (this file
run with --fake MODE REPORT_DIR) that speaks the notify protocol itself:

  lifecycle  a pipe (both ends under one name: same inode, two open files,
             both kept), a socket pair, a dup of a stored fd (not added
             again), a socket whose peer is gone without FDPOLL=0 (dropped
             on POLLHUP), a notification from another process (ignored,
             NotifyAccess=main); SIGKILL: restarted with the store as
             LISTEN_FDS/LISTEN_FDNAMES, LISTEN_PID and SYSTEMD_EXEC_PID its
             own, the pipe still holding what the first process wrote;
             FDSTOREREMOVE; SIGABRT: restarted again; exit 0: not
             restarted, the store flushed (a stored socket's peer sees EOF)
  limit      FDSTORE=3: the fourth and fifth fd refused; exit 3 restarts
             with the three; exit 0 ends it
  norestart  restart=False: exit 1 ends the service, the store flushed
  stop       stop(): SIGTERM, the store flushed; a service ignoring SIGTERM
             gets SIGKILL
  restart    service_restart(): SIGTERM, the store kept, started at once
  abstract   an abstract $NOTIFY_SOCKET ("@name")

  test_supervisor.py [SCENARIO...]
"""

import array
import fcntl
import json
import os
import signal
import socket
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what)
    return cond


# ------------------------------------------------------------------ fake service


def notify(text, fds=()):
    addr = os.environ["NOTIFY_SOCKET"]
    if addr.startswith("@"):
        addr = "\0" + addr[1:]
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    anc = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))] if fds else []
    s.sendmsg([text.encode()], anc, 0, addr)
    s.close()


def passed_fds():
    """[(name, fd)] of LISTEN_FDS, checked to be for us."""
    n = int(os.environ.get("LISTEN_FDS", "0"))
    names = os.environ.get("LISTEN_FDNAMES", "").split(":") if n else []
    return [(names[i], 3 + i) for i in range(n)]


def fake(mode, report_dir):
    import resource
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))   # SIGABRT without a core file
    pid = os.getpid()
    env = {k: os.environ.get(k) for k in ("SYSTEMD_EXEC_PID", "LISTEN_PID", "LISTEN_FDS",
                                          "LISTEN_FDNAMES", "FDSTORE", "NOTIFY_SOCKET")}
    report = {"pid": pid, "env": env, "gen": 1}
    fds = passed_fds()
    names = [n for n, _ in fds]
    if fds:
        report["gen"] = 2 if "sock" in names else 3
    # Every passed fd must be open, and nothing else above them.
    report["open_fds"] = sorted(int(x) for x in os.listdir("/proc/self/fd"))

    def done():
        with open(os.path.join(report_dir, "report-%d.json" % pid), "w") as f:
            json.dump(report, f)

    if mode == "lifecycle":
        if report["gen"] == 1:
            r, w = os.pipe()
            os.write(w, b"from gen 1\n")
            a, b = socket.socketpair()
            notify("FDSTORE=1\nFDNAME=data", [r, w])
            notify("FDSTORE=1\nFDNAME=sock\nFDPOLL=0", [a.fileno(), b.fileno()])
            notify("FDSTORE=1\nFDNAME=again", [os.dup(r)])        # same open file as r
            p, q = socket.socketpair()
            notify("FDSTORE=1\nFDNAME=auto", [p.fileno()])      # polled: q goes away
            q.close()
            child = os.fork()
            if child == 0:                                       # not the main process
                notify("FDSTORE=1\nFDNAME=intruder", [0])
                os._exit(0)
            os.waitpid(child, 0)
            done()
            notify("READY=1\nSTATUS=gen 1")
        elif report["gen"] == 2:
            data = [fd for n, fd in fds if n == "data"]
            sock = [fd for n, fd in fds if n == "sock"]
            rd = [fd for fd in data if (fcntl.fcntl(fd, fcntl.F_GETFL) & 3) == os.O_RDONLY]
            wr = [fd for fd in data if fd not in rd]
            report["pipe"] = os.read(rd[0], 100).decode() if rd else None
            if wr:
                os.write(wr[0], b"from gen 2\n")
            if len(sock) == 2:
                os.write(sock[0], b"ping")
                report["sock"] = os.read(sock[1], 10).decode()
            notify("FDSTOREREMOVE=1\nFDNAME=sock")
            done()
            notify("READY=1\nSTATUS=gen 2")
        else:
            data = [fd for n, fd in fds if n == "data"]
            rd = [fd for fd in data if (fcntl.fcntl(fd, fcntl.F_GETFL) & 3) == os.O_RDONLY]
            report["pipe"] = os.read(rd[0], 100).decode() if rd else None
            # A socket only the store holds: a grandchild waits for its EOF.
            x, y = socket.socketpair()
            if os.fork() == 0:
                if os.fork() == 0:
                    x.close()
                    y.settimeout(20)
                    try:
                        eof = y.recv(1) == b""
                    except OSError:
                        eof = False
                    if eof:
                        with open(os.path.join(report_dir, "flushed"), "w") as f:
                            f.write("eof\n")
                    os._exit(0)
                os._exit(0)
            os.wait()
            y.close()
            notify("FDSTORE=1\nFDNAME=late\nFDPOLL=0", [x.fileno()])
            x.close()
            signal.signal(signal.SIGUSR1, lambda *_: sys.exit(0))
            done()
            notify("READY=1\nSTATUS=gen 3")
    elif mode == "limit":
        if not fds:
            pipes = [os.pipe() for _ in range(5)]
            notify("FDSTORE=1\nFDNAME=p\nFDPOLL=0", [r for r, _ in pipes])
            done()
            notify("READY=1")
            time.sleep(0.2)
            sys.exit(3)
        done()
        notify("READY=1")
        time.sleep(0.2)
        sys.exit(0)
    elif mode == "norestart":
        r, _ = os.pipe()
        notify("FDSTORE=1\nFDNAME=p", [r])
        done()
        notify("READY=1")
        time.sleep(0.2)
        sys.exit(1)
    elif mode in ("stop", "stubborn", "restart"):
        if mode == "stubborn":
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        if not fds:
            r, _ = os.pipe()
            notify("FDSTORE=1\nFDNAME=kept\nFDPOLL=0", [r])
        done()
        notify("READY=1")
    else:
        sys.exit(2)
    while True:
        signal.pause()


# ------------------------------------------------------------------ the tests


def reports(report_dir):
    out = {}
    for f in os.listdir(report_dir):
        if f.startswith("report-"):
            with open(os.path.join(report_dir, f)) as fh:
                r = json.load(fh)
            out[r["pid"]] = r
    return out


def wait_for(cond, timeout=5.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.01)
    return cond()


def make(tmp, mode, **kw):
    import fdstore_supervisor
    rdir = os.path.join(tmp, mode)
    os.mkdir(rdir)
    sup = fdstore_supervisor.Supervisor(
        [sys.executable, os.path.abspath(__file__), "--fake", mode, rdir],
        log_path=os.path.join(rdir, "log"), log=lambda s: print("  | " + s, flush=True), **kw)
    return sup, rdir


def env_ok(r, n_passed, names, fdstore):
    e = r["env"]
    pid = str(r["pid"])
    ok = e["SYSTEMD_EXEC_PID"] == pid and e["FDSTORE"] == str(fdstore) and e["NOTIFY_SOCKET"]
    if n_passed:
        ok = ok and (e["LISTEN_PID"] == pid and e["LISTEN_FDS"] == str(n_passed) and
                     e["LISTEN_FDNAMES"] == ":".join(names))
        ok = ok and all(fd in r["open_fds"] for fd in range(3, 3 + n_passed))
    else:
        ok = ok and e["LISTEN_FDS"] is None and e["LISTEN_PID"] is None and \
            e["LISTEN_FDNAMES"] is None
    return ok


def scenario_lifecycle(tmp):
    sup, rdir = make(tmp, "lifecycle", fdstore_max=16)
    try:
        pid1 = sup.start()
        check(sup.wait_ready(10) == pid1, "lifecycle: gen 1 READY")
        r1 = reports(rdir)[pid1]
        check(env_ok(r1, 0, [], 16), "lifecycle: gen 1 env: SYSTEMD_EXEC_PID, FDSTORE, no "
              "LISTEN_* (%s)" % r1["env"])
        check(r1["open_fds"][:3] == [0, 1, 2] and len(r1["open_fds"]) <= 4,
              "lifecycle: gen 1 has stdio and nothing else (%s)" % r1["open_fds"])
        check(wait_for(lambda: sup.store_names() == [("data", 2), ("sock", 2)]),
              "lifecycle: store data x2, sock x2; dup not added, auto dropped on HUP (%s)" %
              sup.store_names())
        check(sup.duplicates == 1, "lifecycle: one duplicate (%d)" % sup.duplicates)
        check(sup.hup_removed == 1, "lifecycle: one dropped on POLLHUP (%d)" % sup.hup_removed)
        check(any("not the main process" in w for w in sup.warnings),
              "lifecycle: the intruder's notification ignored")

        sup.kill(signal.SIGKILL)
        pid2 = sup.wait_restarted(10)
        check(pid2 != pid1 and sup.restarts == 1 and sup.exit_statuses == [-9],
              "lifecycle: SIGKILL -> restarted (%s, %s)" % (sup.restarts, sup.exit_statuses))
        r2 = reports(rdir)[pid2]
        check(env_ok(r2, 4, ["data", "data", "sock", "sock"], 16),
              "lifecycle: gen 2 gets the store as LISTEN_FDS=4 (%s)" % r2["env"])
        # 0-2, the four, and the directory fd of the listing itself
        check(len(r2["open_fds"]) <= 3 + 4 + 1, "lifecycle: gen 2 inherits nothing else (%s)" %
              r2["open_fds"])
        check(r2.get("pipe") == "from gen 1\n", "lifecycle: the pipe kept gen 1's bytes (%r)" %
              r2.get("pipe"))
        check(r2.get("sock") == "ping", "lifecycle: the socket pair still connected")
        check(sup.store_names() == [("data", 2)], "lifecycle: FDSTOREREMOVE sock (%s)" %
              sup.store_names())

        sup.kill(signal.SIGABRT)
        pid3 = sup.wait_restarted(10)
        r3 = reports(rdir)[pid3]
        check(sup.restarts == 2 and sup.exit_statuses == [-9, -6],
              "lifecycle: SIGABRT -> restarted (%s)" % sup.exit_statuses)
        check(env_ok(r3, 2, ["data", "data"], 16), "lifecycle: gen 3 env (%s)" % r3["env"])
        check(r3.get("pipe") == "from gen 2\n", "lifecycle: gen 3 reads gen 2's bytes")
        check(sup.store_names() == [("data", 2), ("late", 1)], "lifecycle: gen 3 stored late "
              "(%s)" % sup.store_names())
        check(not os.path.exists(os.path.join(rdir, "flushed")),
              "lifecycle: the stored socket is open while stored")

        sup.kill(signal.SIGUSR1)           # its handler exits 0
        check(sup.wait_exit(10) == "inactive", "lifecycle: exit 0 -> inactive")
        check(sup.exit_statuses == [-9, -6, 0], "lifecycle: statuses %s" % sup.exit_statuses)
        check(sup.store_names() == [], "lifecycle: exit 0 flushed the store")
        check(wait_for(lambda: os.path.exists(os.path.join(rdir, "flushed"))),
              "lifecycle: the flushed socket's peer sees EOF")
        time.sleep(0.3)
        check(sup.pid is None and sup.restarts == 2 and len(sup.pids) == 3,
              "lifecycle: not restarted after exit 0")
    finally:
        sup.stop()


def scenario_limit(tmp):
    sup, rdir = make(tmp, "limit", fdstore_max=3)
    try:
        sup.start()
        sup.wait_ready(10)
        check(wait_for(lambda: sup.refused == 2), "limit: 2 fds refused (%d)" % sup.refused)
        check(sup.store_names() == [("p", 3)], "limit: 3 stored (%s)" % sup.store_names())
        pid2 = sup.wait_restarted(10, old_pid=sup.pids[0])
        check(sup.exit_statuses == [3], "limit: exit 3 restarts (%s)" % sup.exit_statuses)
        check(env_ok(reports(rdir)[pid2], 3, ["p"] * 3, 3), "limit: gen 2 gets the three")
        check(sup.wait_exit(10) == "inactive" and sup.exit_statuses == [3, 0],
              "limit: exit 0 ends it (%s)" % sup.exit_statuses)
        check(sup.store_size() == 0, "limit: flushed")
    finally:
        sup.stop()


def scenario_norestart(tmp):
    sup, _ = make(tmp, "norestart", restart=False)
    try:
        sup.start()
        sup.wait_ready(10)
        check(sup.store_names() == [("p", 1)], "norestart: stored")
        check(sup.wait_exit(10) == "failed" and sup.exit_statuses == [1] and
              sup.restarts == 0, "norestart: exit 1, failed, no restart")
        check(sup.store_size() == 0, "norestart: flushed")
    finally:
        sup.stop()


def scenario_stop(tmp):
    sup, _ = make(tmp, "stop")
    sup.start()
    sup.wait_ready(10)
    check(sup.store_names() == [("kept", 1)], "stop: stored")
    code = sup.stop()
    check(code == -signal.SIGTERM and sup.store_size() == 0 and sup.restarts == 0,
          "stop: SIGTERM, flushed, no restart (%s)" % code)
    sup, _ = make(tmp, "stubborn")
    sup.start()
    sup.wait_ready(10)
    t = time.monotonic()
    code = sup.stop(timeout=0.5)
    check(code == -signal.SIGKILL and time.monotonic() - t < 5,
          "stop: SIGTERM ignored -> SIGKILL (%s)" % code)


def scenario_restart(tmp):
    sup, rdir = make(tmp, "restart")
    try:
        pid1 = sup.start()
        sup.wait_ready(10)
        pid2 = sup.service_restart(10)
        check(pid2 != pid1 and sup.exit_statuses == [-signal.SIGTERM],
              "restart: SIGTERM, a new process (%s)" % sup.exit_statuses)
        check(env_ok(reports(rdir)[pid2], 1, ["kept"], 4096), "restart: the store passed")
        check(sup.store_names() == [("kept", 1)], "restart: the store kept")
    finally:
        sup.stop()


def scenario_abstract(tmp):
    sup, rdir = make(tmp, "restart", notify_path="@fdstore-selftest-%d" % os.getpid())
    try:
        sup.start()
        sup.wait_ready(10)
        check(sup.store_names() == [("kept", 1)], "abstract: stored through @name")
    finally:
        sup.stop()


def main():
    if sys.argv[1:2] == ["--fake"]:
        fake(sys.argv[2], sys.argv[3])
        return
    cases = {"lifecycle": scenario_lifecycle, "limit": scenario_limit,
             "norestart": scenario_norestart, "stop": scenario_stop,
             "restart": scenario_restart, "abstract": scenario_abstract}
    only = sys.argv[1:] or list(cases)
    with tempfile.TemporaryDirectory(prefix="fdstore-selftest.") as tmp:
        for name in only:
            print("# " + name, flush=True)
            sub = os.path.join(tmp, name)
            os.mkdir(sub)
            try:
                cases[name](sub)
            except Exception as e:
                import traceback
                traceback.print_exc()
                failures.append("%s: %r" % (name, e))
    if failures:
        print("%d failure(s)" % len(failures))
        sys.exit(1)
    print("all supervisor checks passed")


if __name__ == "__main__":
    main()
