# SPDX-License-Identifier: LGPL-2.1-or-later
"""SELinux mediation, differential: the same cases on /usr/bin/dbus-daemon
and on bus1-broker under the same SELinux policy, enforcing and permissive,
in a qemu guest booted with security=selinux (selinux-guest.sh).

  selinux_matrix.py BUS1_BROKER [LSM_NATIVE] [--uid UID]

The policy is this test's own (POLICY below, compiled with checkpolicy and
loaded into the kernel): a handful of types in the dbus class, every class
the policy does not declare allowed (handle_unknown=allow), so that only
the bus' questions are mediated. Unlike AppArmor on Debian's kernels,
SELinux labels unix socket peers itself: nothing is supplied.

Every case's outcome must be the same on both buses, and on dbus-daemon the
expected one for the mode (in permissive mode, what enforcing denies goes
through). With /dev/bus1 and LSM_NATIVE, bus1-broker runs the cases again
with the service, the client and the deaf service as native clients.
"""

import os
import re
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import lsm_common  # noqa: E402
from lsm_common import (AD, DAEMON, LSM_IFACE, LSM_PATH, PEER, PY, SIGNAL_PATH, SVC,  # noqa: E402
                        Client, before_hello, call, compare, write_bus_config)

WORK = "/run/bus1-selinux"
SELINUXFS = "/sys/fs/selinux"

TYPES = ["kernel_t", "bus_t", "client_t", "svc_t", "deaf_t", "other_t", "eaves_t",
         "clientname_t", "nodriver_t"]
# Initial SIDs, in the kernel's order (all with one context here).
SIDS = ("kernel security unlabeled fs file file_labels init any_socket port netif netmsg node "
        "igmp_packet icmp_socket tcp_socket sysctl_modprobe sysctl sysctl_fs sysctl_kernel "
        "sysctl_net sysctl_net_unix sysctl_vm sysctl_dev kmod policy scmp_packet "
        "devnull").split()


ASSOCIATE = """<selinux>
    <associate own="org.bus1.Lsm.ClientName" context="system_u:object_r:clientname_t"/>
  </selinux>"""


def ctx(t):
    return "system_u:system_r:%s" % t


def policy(extra=""):
    """The test policy: the process class (the kernel requires it) and dbus."""
    clients = "{ client_t svc_t deaf_t other_t eaves_t kernel_t }"
    every = "{ %s }" % " ".join(TYPES)
    return "\n".join(
        ["class process", "class dbus"] + ["sid %s" % s for s in SIDS] +
        ["class process { transition dyntransition }",
         "class dbus { acquire_svc send_msg }"] +
        ["type %s;" % t for t in TYPES] +
        ["role system_r;", "role system_r types %s;" % every,
         "allow %s %s:process { transition dyntransition };" % (every, every),
         # Everyone talks to the driver; every name but the client's own is
         # the bus' context, which only the services may acquire.
         "allow %s bus_t:dbus send_msg;" % clients,
         "allow { svc_t deaf_t other_t } bus_t:dbus acquire_svc;",
         "allow client_t clientname_t:dbus acquire_svc;",
         "allow client_t svc_t:dbus send_msg;",
         "allow svc_t { client_t other_t eaves_t }:dbus send_msg;",
         "allow other_t { svc_t client_t other_t }:dbus send_msg;",
         "allow client_t eaves_t:dbus send_msg;",
         # May talk to the service (and be answered), not to the bus driver.
         "allow nodriver_t svc_t:dbus send_msg;",
         "allow svc_t nodriver_t:dbus send_msg;",
         extra,
         "user system_u roles { system_r };"] +
        ["sid %s %s" % (s, ctx("kernel_t")) for s in SIDS]) + "\n"


def load_policy(extra=""):
    src = os.path.join(WORK, "policy.conf")
    out = os.path.join(WORK, "policy.bin")
    with open(src, "w") as f:
        f.write(policy(extra))
    subprocess.run(["checkpolicy", "-U", "allow", "-c", "33", "-o", out, src], check=True,
                   stdout=subprocess.DEVNULL)
    with open(out, "rb") as f, open(os.path.join(SELINUXFS, "load"), "wb") as load:
        load.write(f.read())


def set_enforcing(on):
    with open(os.path.join(SELINUXFS, "enforce"), "w") as f:
        f.write("1" if on else "0")


def write_config(bus_dir):
    svcdir = os.path.join(bus_dir, "services")
    os.makedirs(svcdir, exist_ok=True)
    for name, t in (("org.bus1.Lsm.Activatable", "svc_t"),
                    ("org.bus1.Lsm.ActivatableDeaf", "deaf_t")):
        with open(os.path.join(svcdir, name + ".service"), "w") as f:
            f.write("[D-BUS Service]\nName=%s\nExec=/usr/bin/runcon %s %s %s --activated %s\n"
                    % (name, ctx(t), PY, PEER, name))
    return write_bus_config(bus_dir, svcdir, ASSOCIATE)


def run_cases(address, uid, enforcing, native, reexec):
    out = []
    clients = []

    def case(name, outcome, expected):
        out.append((name, outcome, expected))

    def denied(allowed):
        return AD if enforcing else allowed

    def client(t, refusable=False):
        roles = ("svc_t", "client_t", "deaf_t", "nodriver_t")
        c = Client(address, ["runcon", ctx(t)], uid, native if t in roles else None,
                   refusable)
        clients.append(c)
        return c

    try:
        svc, cli, deaf = client("svc_t"), client("client_t"), client("deaf_t")
        other = client("other_t")

        case("features: SELinux listed", "SELinux" in other.do("features"), True)
        case("context: of a connection", other.do("context", name=svc.ready["ready"]),
             ctx("svc_t"))
        case("context: of the bus", other.do("context", name="org.freedesktop.DBus"),
             ctx("bus_t"))
        case("acquire: the bus' context, allowed", svc.do("own", name=SVC), "reply:1")
        case("acquire: the bus' context, denied",
             cli.do("own", name="org.bus1.Lsm.Other"), denied("reply:1"))
        case("acquire: an <associate> context, allowed",
             cli.do("own", name="org.bus1.Lsm.ClientName"), "reply:1")
        case("acquire: deaf service", deaf.do("own", name="org.bus1.Lsm.Deaf"), "reply:1")

        case("send: allowed", call(cli, SVC), "reply")
        case("send: denied", call(cli, "org.bus1.Lsm.Deaf"), denied("reply"))
        case("send: from another type, denied", call(other, "org.bus1.Lsm.Deaf"),
             denied("reply"))
        case("send: what reached the services", svc.do("seen") + deaf.do("seen"),
             [["call", LSM_PATH, LSM_IFACE, "Allowed"]] + (
                 [] if enforcing else [["call", LSM_PATH, LSM_IFACE, "Allowed"]] * 2))

        rule = "type='signal',interface='org.bus1.Lsm'"
        for c in (cli, deaf, other):
            c.do("match", rule=rule)
        svc.do("emit", path=SIGNAL_PATH, iface=LSM_IFACE, member="Ping")
        sig = [["signal", SIGNAL_PATH, LSM_IFACE, "Ping"]]
        case("signal: a receiver the policy allows", cli.do("seen"), sig)
        case("signal: a receiver the policy denies", deaf.do("seen"), [] if enforcing else sig)
        case("signal: another allowed receiver", other.do("seen"), sig)

        priv = uid == 0
        eaves = client("eaves_t")
        case("eavesdrop: AddMatch eavesdrop=true (no permission of its own)",
             eaves.do("match", rule="eavesdrop=true,interface='org.bus1.Lsm'"),
             "reply" if priv else AD)
        other.do("match", rule="eavesdrop=true,interface='org.bus1.Lsm'")
        call(cli, SVC, member="Overheard")
        heard = [["call", LSM_PATH, LSM_IFACE, "Overheard"]] if priv else []
        case("eavesdrop: an eavesdropper the sender may send to", eaves.do("seen"), heard)
        case("eavesdrop: one the sender may not send to", other.do("seen"),
             [] if enforcing else heard)
        svc.do("seen")

        if reexec:
            reexec()
        case("after a re-exec: allowed", call(cli, SVC), "reply")
        case("after a re-exec: denied", call(cli, "org.bus1.Lsm.Deaf"), denied("reply"))
        svc.do("seen")
        deaf.do("seen")

        # A policy load reaches the bus' cache: allowed now (the call, and its
        # reply: SELinux asks replies too), denied again after.
        load_policy("allow client_t deaf_t:dbus send_msg; allow deaf_t client_t:dbus send_msg;")
        time.sleep(0.5)
        case("policy load: a new allow rule", call(cli, "org.bus1.Lsm.Deaf"), "reply")
        load_policy()
        time.sleep(0.5)
        case("policy load: the rule gone again", call(cli, "org.bus1.Lsm.Deaf"),
             denied("reply"))

        # The driver (issue 39): Hello is asked first, against the bus'
        # context; denied, the client is refused at connect.
        nodriver = client("nodriver_t", refusable=True)
        case("driver: a type that may not send to the bus, Hello",
             nodriver.connected, "refused: " + AD if enforcing else "connected")
        if nodriver.connected == "connected":
            case("driver: that type, a call to the service", call(nodriver, SVC), "reply")
            case("driver: that type, RequestName",
                 nodriver.do("own", name="org.bus1.Lsm.NoDriver"), "reply:1")
        case("driver: what reached the service", svc.do("seen"),
             [] if enforcing else [["call", LSM_PATH, LSM_IFACE, "Allowed"]])
        # A message to the driver before Hello is asked of the policy first
        # (denied: AccessDenied with a record); allowed, the bus' own rule
        # refuses it (AccessDenied, no record) and Hello may follow.
        case("driver: GetId before Hello, a type that may not send to the bus",
             before_hello(address, ["runcon", ctx("nodriver_t")], uid),
             "GetId: %s, then Hello: %s" % (AD, AD if enforcing else "reply"))
        case("driver: GetId before Hello, a type that may",
             before_hello(address, ["runcon", ctx("client_t")], uid),
             "GetId: %s, then Hello: reply" % AD)

        # Activation is not asked; the started service is, when it has the name.
        case("activation: a service the client may send to",
             call(cli, "org.bus1.Lsm.Activatable"), "reply")
        case("activation: a service the client may not send to",
             call(cli, "org.bus1.Lsm.ActivatableDeaf"), denied("reply"))
    finally:
        for c in clients:
            c.close()
    return out


def who_to_whom(line):
    """An AVC line without what the check was about ("for msgtype=..."). A
    permissive cache logs each denied pair once, with the first message's
    details; bus1-broker's re-exec in the middle starts a new cache, so the
    pairs are compared, not the messages that happened to be first."""
    return re.sub(r" for .* scontext=", " scontext=", line)


def run_bus(argv, uid, bus_dir, enforcing, native=None):
    os.makedirs(bus_dir)
    return lsm_common.run_bus(argv, bus_dir, write_config(bus_dir),
                              lambda address, reexec: run_cases(address, uid, enforcing,
                                                                native, reexec),
                              "avc:", wrap=["runcon", ctx("bus_t")],
                              distinct=None if enforcing else who_to_whom)


def selinux_config():
    """libselinux counts SELinux as enabled only with selinuxfs mounted *and*
    /etc/selinux/config present (else runcon refuses to run and dbus-daemon
    does not mediate). policycoreutils' postinst writes one; a machine without
    that package has none. The guest's root is the host's under a tmpfs
    overlay, so writing it here changes nothing on the host."""
    path = "/etc/selinux/config"
    if not os.path.exists(path):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write("SELINUX=permissive\nSELINUXTYPE=default\n")


def main():
    (broker,), native, uid = lsm_common.parse_args(sys.argv[1:], 1)
    if not os.path.exists(os.path.join(SELINUXFS, "load")):
        subprocess.run(["mount", "-t", "selinuxfs", "selinuxfs", SELINUXFS], check=True)
    selinux_config()
    shutil.rmtree(WORK, ignore_errors=True)
    os.makedirs(WORK, mode=0o755)
    load_policy()

    failures = n = 0
    for enforcing in (True, False):
        set_enforcing(enforcing)
        mode = "enforcing" if enforcing else "permissive"
        tag = "%s-%d" % (mode, uid)
        ref = run_bus([DAEMON], uid, os.path.join(WORK, "dbus-daemon-" + tag), enforcing)
        runs = [("bus1-broker", run_bus([broker], uid, os.path.join(WORK, "bus1-" + tag),
                                        enforcing))]
        if native:
            runs.append(("bus1-broker, native clients",
                         run_bus([broker], uid, os.path.join(WORK, "native-" + tag),
                                 enforcing, native)))
        failures += compare("SELinux matrix, %s, clients as uid %d" % (mode, uid), ref, runs)
        n = len(ref)
    set_enforcing(True)
    print("# %d case(s) on each bus and mode, %d failure(s)" % (n, failures))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
