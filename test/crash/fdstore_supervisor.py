#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""A small service manager for one service: the parts of systemd a service
with Type=notify, Restart=on-failure and FileDescriptorStoreMax= talks to,
so that crash survival through the fd store can be tested without systemd.

What it does, as systemd does it:

 * $NOTIFY_SOCKET: a datagram socket of its own (a path in a private
   directory, or an abstract name given as "@name"), SO_PASSCRED on. Only
   the main process may talk to it (NotifyAccess=main), unless
   notify_access="all".
 * FDSTORE=1 (+ FDNAME=, FDPOLL=): the fds of the message go to the store
   under that name (default "stored"). An fd that is the same open file as
   one stored already is not added again (systemd's same_fd(): same inode,
   then kcmp(KCMP_FILE) or, without kcmp, the same access mode). Beyond
   fdstore_max entries an fd is refused (closed, warned about). Unless the
   message says FDPOLL=0, a stored fd is watched and dropped once it reports
   POLLHUP or POLLERR (a socket whose peer went away).
 * FDSTOREREMOVE=1 + FDNAME=: every stored fd of that name is closed.
 * READY=1 is recorded (wait_ready()); STOPPING=1, RELOADING=1, STATUS=,
   MAINPID=, WATCHDOG=, BARRIER= ... are recorded and otherwise ignored. fds
   sent without FDSTORE=1 are closed.
 * The service is started by fork() and execve() with NOTIFY_SOCKET,
   FDSTORE=<max> and SYSTEMD_EXEC_PID=<its own pid>; the store (after the
   listen_fds of a .socket unit, if any) is passed as fds 3... with
   LISTEN_FDS, LISTEN_PID and LISTEN_FDNAMES. stdin is /dev/null, stdout and
   stderr go to log_path (or are inherited), signal dispositions and the
   signal mask are reset, the service gets a session of its own and
   SIGKILL if the supervisor dies.
 * Restart=on-failure: a death by a signal or a non-zero exit starts the
   service again after restart_sec, the store kept. An exit 0 or stop()
   (SIGTERM, SIGKILL after a timeout) flushes the store: every stored fd is
   closed. service_restart() is "systemctl restart": SIGTERM, the store
   kept, started again at once.

The notify socket is drained before a death is handled, so that whatever the
dead process sent before it died counts (systemd gives its notify socket a
higher priority than SIGCHLD for the same reason). Nothing here is a start
limit: the caller bounds how often it kills.

Importable (Supervisor) and a command line:

  fdstore_supervisor.py [--fdstore-max N] [--no-restart] [--restart-sec S]
                        [--log FILE] [--verbose] -- COMMAND [ARG...]

runs COMMAND as the service until SIGINT or SIGTERM (then stops it), and
exits with its last exit status when it ends for good by itself.
"""

import argparse
import array
import ctypes
import errno
import fcntl
import os
import platform
import select
import signal
import socket
import struct
import sys
import tempfile
import threading
import time

SCM_MAX_FD = 253
NOTIFY_BUFFER_MAX = 4096
UCRED = struct.Struct("iII")

# kcmp(2) by architecture; KCMP_FILE compares two fds' open files.
_KCMP_NR = {"x86_64": 312, "aarch64": 272, "riscv64": 272, "i386": 349, "i686": 349,
            "armv7l": 378, "ppc64le": 354, "ppc64": 354, "s390x": 343}
KCMP_FILE = 0
_libc = ctypes.CDLL(None, use_errno=True)
PR_SET_PDEATHSIG = 1


def _kcmp_same_file(a, b):
    """True/False from kcmp(KCMP_FILE), None if the kernel cannot tell us."""
    nr = _KCMP_NR.get(platform.machine())
    if nr is None:
        return None
    pid = os.getpid()
    r = _libc.syscall(ctypes.c_long(nr), ctypes.c_int(pid), ctypes.c_int(pid),
                      ctypes.c_int(KCMP_FILE), ctypes.c_ulong(a), ctypes.c_ulong(b))
    if r < 0:
        return None
    return r == 0


def same_open_file(a, b):
    """Whether fds @a and @b refer to the same open file (systemd's same_fd())."""
    sa, sb = os.fstat(a), os.fstat(b)
    if (sa.st_dev, sa.st_ino) != (sb.st_dev, sb.st_ino):
        return False
    k = _kcmp_same_file(a, b)
    if k is not None:
        return k
    # Without kcmp: the same inode and the same access mode and flags.
    return fcntl.fcntl(a, fcntl.F_GETFL) == fcntl.fcntl(b, fcntl.F_GETFL)


def fdname_valid(name):
    """systemd's fdname_is_valid(): 1..255 printable ASCII characters, no ':'."""
    return 0 < len(name) <= 255 and all(" " <= c <= "~" and c != ":" for c in name)


class Supervisor:
    """One service, started, watched and restarted as systemd would (see the
    module's doc). Thread-safe; a background thread owns the notify socket,
    the store and the service process."""

    def __init__(self, argv, env=None, fdstore_max=4096, restart=True, restart_sec=0.05,
                 log_path=None, notify_path=None, notify_access="main", listen_fds=(),
                 verbose=False, log=None):
        self.argv = list(argv)
        self.env = dict(os.environ if env is None else env)
        self.fdstore_max = fdstore_max
        self.restart = restart
        self.restart_sec = restart_sec
        self.log_path = log_path
        self.notify_access = notify_access
        self.listen_fds = list(listen_fds)   # [(name, fd)] of a .socket unit, not ours
        self.verbose = verbose
        self._log = log or (lambda s: print("supervisor: " + s, file=sys.stderr, flush=True))

        self._tmpdir = None
        if notify_path is None:
            self._tmpdir = tempfile.mkdtemp(prefix="fdstore-supervisor.")
            notify_path = os.path.join(self._tmpdir, "notify")
        self.notify_path = notify_path

        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._thread = None
        self._sock = None
        self._ep = None
        self._wake_r = self._wake_w = None

        self._store = []             # [[name, fd, poll, (st_dev, st_ino)]] in store order
        self._pid = None
        self._pidfd = None
        self._ready = False
        self._spawn_at = None        # monotonic time of a pending (re)start
        self._stopping = False
        self._manual_restart = False
        self._quit = False
        self._state = "inactive"
        self._spawn_error = None

        self.pids = []               # every pid started, in order
        self.restarts = 0            # automatic restarts (Restart=on-failure)
        self.exit_statuses = []      # os.waitstatus_to_exitcode(): -SIG for a signal
        self.killed = []             # [(pid, signal, monotonic time)] by kill()
        self.last_kill_time = None
        self.ready_times = {}        # pid -> monotonic time of its READY=1
        self.notifications = []      # [(pid, {key: value}, n_fds)], the last 1000
        self.warnings = []
        self.refused = 0             # fds refused: store full
        self.duplicates = 0          # fds not added: the same open file stored already
        self.hup_removed = 0         # fds dropped on POLLHUP/POLLERR
        self.max_store_size = 0

    # ------------------------------------------------------------ public API

    @property
    def pid(self):
        with self._lock:
            return self._pid

    @property
    def state(self):
        """"running", "auto-restart", "inactive" (exited 0 or stopped) or "failed"."""
        with self._lock:
            return self._state

    def start(self, timeout=10):
        """Bind $NOTIFY_SOCKET, start the thread and the service; returns its pid
        (not waiting for READY=1: see wait_ready())."""
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
        address = self.notify_path
        if address.startswith("@"):
            address = "\0" + address[1:]
        self._sock.bind(address)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        # As systemd: a big receive buffer, so that a burst of messages does not block.
        for opt in (getattr(socket, "SO_RCVBUFFORCE", 33), socket.SO_RCVBUF):
            try:
                self._sock.setsockopt(socket.SOL_SOCKET, opt, 8 * 1024 * 1024)
                break
            except OSError:
                continue
        self._sock.setblocking(False)
        self._check_qlen()
        self._wake_r, self._wake_w = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)
        self._ep = select.epoll()
        self._ep.register(self._sock.fileno(), select.EPOLLIN)
        self._ep.register(self._wake_r, select.EPOLLIN)
        with self._lock:
            self._spawn_at = time.monotonic()
            self._state = "auto-restart"
        self._thread = threading.Thread(target=self._loop, name="fdstore-supervisor",
                                        daemon=True)
        self._thread.start()
        self._wake()
        with self._cond:
            if not self._cond.wait_for(lambda: self._pid is not None or self._spawn_error,
                                       timeout):
                raise TimeoutError("service not started")
            if self._spawn_error:
                raise RuntimeError(self._spawn_error)
            return self._pid

    def wait_ready(self, timeout=10):
        """The pid of the running process once it said READY=1."""
        def done():
            return (self._pid is not None and self._ready) or self._state in ("inactive",
                                                                                "failed")
        with self._cond:
            if not self._cond.wait_for(done, timeout):
                raise TimeoutError("no READY=1 within %.1f s (pid %s)" % (timeout, self._pid))
            if self._pid is None:
                raise RuntimeError("service ended (%s) before READY=1, exit statuses %s" %
                                   (self._state, self.exit_statuses))
            return self._pid

    def kill(self, sig=signal.SIGKILL, restart=False):
        """Signal the main process (through its pidfd: never another process
        of a reused pid); returns the monotonic time of the kill. With
        @restart, its end (whatever the status) is a "systemctl restart": the
        store kept, the next process started at once."""
        with self._lock:
            if self._pidfd is None:
                raise ProcessLookupError("no service process")
            if restart:
                self._manual_restart = True
            signal.pidfd_send_signal(self._pidfd, sig)
            now = time.monotonic()
            self.killed.append((self._pid, sig, now))
            self.last_kill_time = now
            return now

    def wait_restarted(self, timeout=10, old_pid=None):
        """Wait for a process other than @old_pid (default: the last one
        kill() signalled) to run and say READY=1; returns its pid."""
        if old_pid is None:
            with self._lock:
                old_pid = self.killed[-1][0] if self.killed else None

        def done():
            return ((self._pid not in (None, old_pid) and self._ready) or
                    self._state in ("inactive", "failed"))
        with self._cond:
            if not self._cond.wait_for(done, timeout):
                raise TimeoutError("no new READY service process within %.1f s "
                                   "(pid %s, state %s)" % (timeout, self._pid, self._state))
            if self._pid is None:
                raise RuntimeError("service not restarted (%s), exit statuses %s" %
                                   (self._state, self.exit_statuses))
            return self._pid

    def wait_dead(self, pid=None, timeout=10):
        """Wait until @pid (default: the last one kill() signalled) is reaped."""
        if pid is None:
            with self._lock:
                pid = self.killed[-1][0] if self.killed else None
        with self._cond:
            if not self._cond.wait_for(lambda: self._pid != pid, timeout):
                raise TimeoutError("pid %s still runs" % pid)

    def wait_exit(self, timeout=10):
        """Wait until the service ended for good (no restart pending); returns
        its state ("inactive" or "failed")."""
        with self._cond:
            if not self._cond.wait_for(lambda: self._state in ("inactive", "failed"),
                                       timeout):
                raise TimeoutError("service still %s" % self._state)
            return self._state

    def store_names(self):
        """[(name, count)] of the store, in the order the names were first stored."""
        with self._lock:
            out = {}
            for name, *_ in self._store:
                out[name] = out.get(name, 0) + 1
            return list(out.items())

    def store_size(self):
        with self._lock:
            return len(self._store)

    def service_restart(self, timeout=10):
        """"systemctl restart": SIGTERM, the store kept, the next process
        started at once; returns its pid once READY=1."""
        with self._lock:
            old = self._pid
        self.kill(signal.SIGTERM, restart=True)
        return self.wait_restarted(timeout, old_pid=old)

    def stop(self, timeout=10):
        """"systemctl stop": SIGTERM (SIGKILL after @timeout), the store flushed,
        the thread and socket gone. Returns the last exit status, if any."""
        if self._thread is None:
            return None
        with self._cond:
            self._stopping = True
            self._spawn_at = None
            if self._pidfd is not None:
                signal.pidfd_send_signal(self._pidfd, signal.SIGTERM)
                if not self._cond.wait_for(lambda: self._pid is None, timeout):
                    self._warn("pid %d ignored SIGTERM for %.1f s: SIGKILL" % (self._pid,
                                                                               timeout))
                    signal.pidfd_send_signal(self._pidfd, signal.SIGKILL)
                    self._cond.wait_for(lambda: self._pid is None, 10)
            self._quit = True
        self._wake()
        self._thread.join(10)
        self._thread = None
        with self._lock:
            self._flush("stop")
            self._state = "inactive"
        self._ep.close()
        self._sock.close()
        os.close(self._wake_r)
        os.close(self._wake_w)
        if self._tmpdir:
            try:
                os.unlink(self.notify_path)
                os.rmdir(self._tmpdir)
            except OSError:
                pass
        return self.exit_statuses[-1] if self.exit_statuses else None

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()

    # ------------------------------------------------------------ internals

    def _note(self, text):
        if self.verbose:
            self._log(text)

    def _warn(self, text):
        self.warnings.append(text)
        self._log("warning: " + text)

    def _wake(self):
        try:
            os.write(self._wake_w, b"x")
        except BlockingIOError:
            pass

    def _check_qlen(self):
        try:
            with open("/proc/sys/net/unix/max_dgram_qlen") as f:
                qlen = int(f.read())
        except (OSError, ValueError):
            return
        if qlen < 512:
            self._note("net.unix.max_dgram_qlen is %d (systemd raises it to 512 at boot): "
                       "a service sending more notifications at once blocks or gets EAGAIN "
                       "until they are read" % qlen)

    def _loop(self):
        try:
            while True:
                with self._lock:
                    if self._quit:
                        return
                    if self._spawn_at is not None:
                        timeout = max(0.0, self._spawn_at - time.monotonic())
                    else:
                        timeout = -1
                events = self._ep.poll(timeout)
                # The notify socket first: a dead process's last words count.
                events.sort(key=lambda e: e[0] != self._sock.fileno())
                for fd, ev in events:
                    if fd == self._sock.fileno():
                        self._drain_notify()
                    elif fd == self._wake_r:
                        try:
                            os.read(self._wake_r, 4096)
                        except BlockingIOError:
                            pass
                    elif fd == self._pidfd:
                        self._child_exited()
                    else:
                        self._stored_fd_event(fd)
                with self._lock:
                    if self._spawn_at is not None and time.monotonic() >= self._spawn_at \
                            and not self._quit:
                        self._spawn()
        except Exception as e:  # never die silently: the test would hang
            import traceback
            traceback.print_exc()
            with self._cond:
                self._spawn_error = "supervisor thread died: %r" % e
                self._state = "failed"
                self._cond.notify_all()

    # ----------------------------------------------------------- notify socket

    def _drain_notify(self):
        while True:
            try:
                msg, anc, flags, _ = self._sock.recvmsg(
                    NOTIFY_BUFFER_MAX,
                    socket.CMSG_SPACE(SCM_MAX_FD * 4) + socket.CMSG_SPACE(UCRED.size),
                    socket.MSG_CMSG_CLOEXEC)
            except (BlockingIOError, InterruptedError):
                return
            fds, pid = [], None
            for level, typ, data in anc:
                if level == socket.SOL_SOCKET and typ == socket.SCM_RIGHTS:
                    a = array.array("i")
                    a.frombytes(data[:len(data) - len(data) % a.itemsize])
                    fds.extend(a)
                elif level == socket.SOL_SOCKET and typ == socket.SCM_CREDENTIALS:
                    pid = UCRED.unpack_from(data)[0]
            with self._cond:
                self._notification(msg, flags, fds, pid)
                self._cond.notify_all()

    def _close_all(self, fds):
        for fd in fds:
            try:
                os.close(fd)
            except OSError:
                pass

    def _notification(self, msg, flags, fds, pid):
        if flags & socket.MSG_CTRUNC:
            self._warn("notification from pid %s: control data truncated (fds lost)" % pid)
        if flags & socket.MSG_TRUNC:
            self._warn("notification from pid %s longer than %d bytes, ignored" %
                       (pid, NOTIFY_BUFFER_MAX))
            self._close_all(fds)
            return
        if self.notify_access == "main" and (pid is None or pid != self._pid):
            self._warn("notification from pid %s, not the main process %s: ignored "
                       "(NotifyAccess=main)" % (pid, self._pid))
            self._close_all(fds)
            return
        try:
            text = msg.decode()
        except UnicodeDecodeError:
            self._warn("notification from pid %s is not UTF-8, ignored" % pid)
            self._close_all(fds)
            return
        kv = {}
        for line in text.split("\n"):
            if not line:
                continue
            if "=" not in line:
                self._warn("notification line without '=': %r" % line)
                continue
            k, v = line.split("=", 1)
            kv[k] = v
        self.notifications.append((pid, kv, len(fds)))
        del self.notifications[:-1000]
        self._note("pid %s: %s%s" % (pid, " ".join("%s=%s" % i for i in kv.items()),
                                     " (+%d fds)" % len(fds) if fds else ""))

        if kv.get("READY") == "1" and not self._ready:
            self._ready = True
            self.ready_times[self._pid] = time.monotonic()
        if "MAINPID" in kv and kv["MAINPID"] != str(self._pid):
            self._warn("MAINPID=%s ignored (main pid stays %s)" % (kv["MAINPID"], self._pid))

        if kv.get("FDSTOREREMOVE") == "1":
            name = kv.get("FDNAME")
            if name is None or not fdname_valid(name):
                self._warn("FDSTOREREMOVE=1 without a valid FDNAME (%r), ignored" % name)
            else:
                self._remove_name(name)

        if kv.get("FDSTORE") == "1":
            name = kv.get("FDNAME", "stored")
            poll = kv.get("FDPOLL", "1") != "0"
            if not fdname_valid(name):
                self._warn("FDSTORE=1 with invalid FDNAME %r: %d fds closed" % (name, len(fds)))
                self._close_all(fds)
            else:
                for fd in fds:
                    self._add(name, fd, poll)
        elif fds:
            if kv.get("BARRIER") != "1":
                self._warn("%d fds sent without FDSTORE=1: closed" % len(fds))
            self._close_all(fds)

    # --------------------------------------------------------------- the store

    def _add(self, name, fd, poll):
        st = os.fstat(fd)
        key = (st.st_dev, st.st_ino)
        for entry in self._store:
            if entry[3] == key and same_open_file(entry[1], fd):
                self.duplicates += 1
                self._note("fd %d (%s) is stored already as %r: not added" % (fd, name,
                                                                             entry[0]))
                os.close(fd)
                return
        if len(self._store) >= self.fdstore_max:
            self.refused += 1
            self._warn("fd store full (%d entries, FileDescriptorStoreMax=%d): fd named %r "
                       "refused" % (len(self._store), self.fdstore_max, name))
            os.close(fd)
            return
        self._store.append([name, fd, poll, key])
        self.max_store_size = max(self.max_store_size, len(self._store))
        if poll:
            # Events 0: only POLLHUP and POLLERR, as systemd watches a stored fd.
            try:
                self._ep.register(fd, 0)
            except OSError as e:
                # an fd epoll cannot watch (a regular file): kept, unwatched
                if e.errno != errno.EPERM:
                    raise
                self._store[-1][2] = False

    def _drop(self, entry):
        if entry[2]:
            try:
                self._ep.unregister(entry[1])
            except (OSError, ValueError):
                pass
        os.close(entry[1])

    def _remove_name(self, name):
        keep = []
        for entry in self._store:
            if entry[0] == name:
                self._drop(entry)
            else:
                keep.append(entry)
        self._note("removed %d fds named %r" % (len(self._store) - len(keep), name))
        self._store = keep

    def _stored_fd_event(self, fd):
        with self._cond:
            entry = next((e for e in self._store if e[1] == fd and e[2]), None)
            if entry is None:
                return
            # The event may be stale (the number reused within one batch): ask again.
            p = select.poll()
            p.register(fd, 0)
            if not any(ev & (select.POLLHUP | select.POLLERR) for _, ev in p.poll(0)):
                return
            self._note("stored fd %d (%r): POLLHUP/POLLERR, dropped" % (fd, entry[0]))
            self.hup_removed += 1
            self._drop(entry)
            self._store.remove(entry)
            self._cond.notify_all()

    def _flush(self, why):
        if self._store:
            self._note("store flushed (%s): %d fds closed" % (why, len(self._store)))
        for entry in self._store:
            self._drop(entry)
        self._store = []

    # ---------------------------------------------------------- the process

    def _spawn(self):
        """Fork and exec the service (lock held)."""
        self._spawn_at = None
        entries = [(n, fd) for n, fd in self.listen_fds] + \
                  [(e[0], e[1]) for e in self._store]
        env = dict(self.env)
        for k in ("LISTEN_FDS", "LISTEN_PID", "LISTEN_FDNAMES", "SYSTEMD_EXEC_PID"):
            env.pop(k, None)
        env["NOTIFY_SOCKET"] = self.notify_path
        env["FDSTORE"] = str(self.fdstore_max)
        if entries:
            env["LISTEN_FDS"] = str(len(entries))
            env["LISTEN_FDNAMES"] = ":".join(n for n, _ in entries)
        log_fd = -1
        if self.log_path:
            log_fd = os.open(self.log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND |
                             os.O_CLOEXEC, 0o644)
        null_fd = os.open("/dev/null", os.O_RDONLY | os.O_CLOEXEC)
        pid = os.fork()
        if pid == 0:
            self._child(entries, env, log_fd, null_fd)
        if log_fd >= 0:
            os.close(log_fd)
        os.close(null_fd)
        self._pid = pid
        self._pidfd = os.pidfd_open(pid)
        self._ep.register(self._pidfd, select.EPOLLIN)
        self._ready = False
        self._state = "running"
        if self.pids:
            self.restarts += 1
        self.pids.append(pid)
        self._note("started pid %d with %d fds (%s)" % (pid, len(entries),
                                                         env.get("LISTEN_FDNAMES", "")))
        self._cond.notify_all()

    def _child(self, entries, env, log_fd, null_fd):
        """In the forked child: never returns."""
        try:
            _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
            os.setsid()
            # execve() resets caught signals; Python ignores these two, which would stay.
            for s in (signal.SIGPIPE, signal.SIGXFSZ):
                signal.signal(s, signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_SETMASK, [])
            n = len(entries)
            low = 3 + n
            # Everything we still need above the range the store goes to.
            high = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, low) for _, fd in entries]
            null_fd = fcntl.fcntl(null_fd, fcntl.F_DUPFD_CLOEXEC, low)
            if log_fd >= 0:
                log_fd = fcntl.fcntl(log_fd, fcntl.F_DUPFD_CLOEXEC, low)
            os.dup2(null_fd, 0)
            if log_fd >= 0:
                os.dup2(log_fd, 1)
                os.dup2(log_fd, 2)
            for i, fd in enumerate(high):
                os.dup2(fd, 3 + i)          # inheritable
            os.closerange(low, 1 << 20)
            pid = str(os.getpid())
            env["SYSTEMD_EXEC_PID"] = pid
            if n:
                env["LISTEN_PID"] = pid
            os.execve(self.argv[0], self.argv, env)
        except BaseException as e:
            try:
                os.write(2, ("fdstore-supervisor: exec %s: %r\n" % (self.argv[0], e)).encode())
            except OSError:
                pass
        finally:
            os._exit(127)

    def _child_exited(self):
        # Whatever the process sent before it died comes first.
        self._drain_notify()
        with self._cond:
            if self._pid is None:
                return
            p, status = os.waitpid(self._pid, os.WNOHANG)
            if p == 0:
                return
            code = os.waitstatus_to_exitcode(status)
            self.exit_statuses.append(code)
            self._ep.unregister(self._pidfd)
            os.close(self._pidfd)
            old = self._pid
            self._pidfd = None
            self._pid = None
            self._ready = False
            what = "killed by signal %d" % -code if code < 0 else "exited %d" % code
            if self._stopping:
                self._note("pid %d %s (stopped)" % (old, what))
                self._flush("stop")
                self._state = "inactive"
            elif self._manual_restart:
                self._manual_restart = False
                self._note("pid %d %s (restart): store kept" % (old, what))
                self._spawn()
            elif code != 0 and self.restart:
                self._note("pid %d %s: restart in %.3f s, store of %d kept" %
                           (old, what, self.restart_sec, len(self._store)))
                self._spawn_at = time.monotonic() + self.restart_sec
                self._state = "auto-restart"
            else:
                self._note("pid %d %s: not restarted" % (old, what))
                self._flush("service ended")
                self._state = "failed" if code != 0 else "inactive"
            self._cond.notify_all()


# ------------------------------------------------------------------ command line


def main(argv=None):
    ap = argparse.ArgumentParser(
        description="Run one service as systemd would with Type=notify, "
                    "Restart=on-failure and FileDescriptorStoreMax=.")
    ap.add_argument("--fdstore-max", type=int, default=4096)
    ap.add_argument("--no-restart", action="store_true")
    ap.add_argument("--restart-sec", type=float, default=0.05)
    ap.add_argument("--log", help="the service's stdout and stderr (default: ours)")
    ap.add_argument("--notify-access", choices=("main", "all"), default="main")
    ap.add_argument("--verbose", "-v", action="store_true")
    ap.add_argument("command", nargs=argparse.REMAINDER)
    args = ap.parse_args(argv)
    cmd = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not cmd:
        ap.error("no command")
    stop = threading.Event()
    for s in (signal.SIGINT, signal.SIGTERM):
        signal.signal(s, lambda *_: stop.set())
    sup = Supervisor(cmd, fdstore_max=args.fdstore_max, restart=not args.no_restart,
                     restart_sec=args.restart_sec, log_path=args.log,
                     notify_access=args.notify_access, verbose=args.verbose)
    sup.start()
    print("supervisor: NOTIFY_SOCKET=%s, pid %d" % (sup.notify_path, sup.pid), flush=True)
    while not stop.is_set() and sup.state not in ("inactive", "failed"):
        stop.wait(0.2)
    code = sup.stop()
    print("supervisor: %d restarts, exit statuses %s" % (sup.restarts, sup.exit_statuses),
          flush=True)
    if code is None:
        return 0
    return 128 - code if code < 0 else code


if __name__ == "__main__":
    sys.exit(main())
