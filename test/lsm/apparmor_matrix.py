# SPDX-License-Identifier: LGPL-2.1-or-later
"""AppArmor mediation, differential: the same cases on /usr/bin/dbus-daemon
and on bus1-broker, with the same profiles, in a qemu guest (run-lsm-guest.sh).

  apparmor_matrix.py BUS1_BROKER SHIM [LSM_NATIVE] [--uid UID]

The guest's kernel has AppArmor but, as every Debian kernel, neither the
dbus feature flag nor unix socket peer labels. So, as the issue asks, the
test supplies both and nothing else: a copy of the kernel's features tree
with dbus/mask, bound over apparmorfs' features directory (the flag both
buses look for), and SHIM (peersec-shim.so, LD_PRELOADed into both buses)
answering SO_PEERSEC with the peer's label. The profiles are compiled with
apparmor_parser -M against that tree (Debian's parser.conf pins older
features and would drop the dbus rules) and the kernel answers the label
queries itself.

Every case's outcome (the reply or error name each client got, and what
reached the other ends) must be the same on both buses, and on dbus-daemon
it must be the expected one (so a setup that mediated nothing would fail).
Clients run as root, or as UID (--uid) where root is not the point.

With /dev/bus1 and LSM_NATIVE (lsm-native), bus1-broker runs the cases a
second time with the service, the client and the deaf service as native
clients (their label is the one of the socket they bootstrapped through),
and must again give dbus-daemon's outcomes of the socket clients; the
direct path is asked for, and must not let a confined client past its
profile.
"""

import os
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import lsm_common  # noqa: E402
from lsm_common import (AD, DAEMON, LSM_IFACE, LSM_PATH, PEER, PY, SIGNAL_PATH, SVC,  # noqa: E402
                        Client, before_hello, call, compare, write_bus_config)

WORK = "/run/bus1-lsm"
# Bound over apparmorfs' features for the guest's life: outside WORK.
FEATURES = "/run/bus1-lsm-features"
AAFS = "/sys/kernel/security/apparmor"

# --------------------------------------------------------------- profiles

# What every client needs besides its case: to run python, and (BASE) to
# talk to the bus driver (whose label is the bus', unconfined).
NO_DRIVER = """
  file,
  capability,
  network,
  signal,
  ptrace,
  unix,
"""
DRIVER = "  dbus send bus=session path=/org/freedesktop/DBus peer=(name=org.freedesktop.DBus),\n"
BASE = NO_DRIVER + DRIVER

# The client's rule for the service, in the profiles of the driver cases.
TO_SVC = """
  dbus send bus=session path=/org/bus1/Lsm interface=org.bus1.Lsm member=Allowed
       peer=(label=bus1test-svc),
  dbus receive bus=session peer=(label=bus1test-svc),
"""

# The driver cases: profiles without BASE's driver rule (issue 39). Each
# may call the service, as bus1test-client may.
DRIVER_PROFILES = {
    # Nothing for the driver: Hello is denied, the client never gets on.
    "bus1test-nodriver": (TO_SVC, ""),
    # No dbus rules at all.
    "bus1test-nodbus": ("", ""),
    # Hello and nothing else of the driver's.
    "bus1test-helloonly": (TO_SVC + """
  dbus send bus=session path=/org/freedesktop/DBus interface=org.freedesktop.DBus member=Hello
       peer=(name=org.freedesktop.DBus),
""", ""),
    # Nothing for the driver, in complain mode: on, with an ALLOWED record.
    "bus1test-nodriver-complain": (TO_SVC, ",complain"),
}

PROFILES = {
    # A service: owns its names, receives anything, sends signals on one path.
    "bus1test-svc": """
  dbus bind bus=session name=org.bus1.Lsm.Service,
  dbus bind bus=session name=org.bus1.Lsm.Activatable,
  dbus receive bus=session,
  dbus send bus=session path=/org/bus1/Lsm/Signal,
""",
    # A client: one name of its own; calls only Allowed on the service's
    # path and interface, and only to a peer labelled bus1test-svc; takes
    # messages from bus1test-svc only.
    "bus1test-client": """
  dbus bind bus=session name=org.bus1.Lsm.ClientName,
  dbus send bus=session path=/org/bus1/Lsm interface=org.bus1.Lsm member=Allowed
       peer=(label=bus1test-svc),
  dbus receive bus=session peer=(label=bus1test-svc),
""",
    # Owns a name but may receive nothing.
    "bus1test-deaf": """
  dbus bind bus=session name=org.bus1.Lsm.Deaf,
""",
    # Receives anything, may not eavesdrop.
    "bus1test-eaves": """
  dbus receive bus=session,
""",
    # Receives anything and may eavesdrop.
    "bus1test-eaves-ok": """
  dbus receive bus=session,
  dbus eavesdrop bus=session,
""",
    # bench_lsm.py: bench-dbus's service and its Echo caller.
    "bus1test-bench-svc": """
  dbus bind bus=session name=org.bus1.Bench,
  dbus receive bus=session,
""",
    "bus1test-bench-client": """
  dbus send bus=session path=/org/bus1/Bench interface=org.bus1.Bench member=Echo
       peer=(label=bus1test-bench-svc),
""",
}
# The client's rules, in complain mode: denials are logged, not enforced.
COMPLAIN = "bus1test-complain"


def profile_text(name, rules, flags="attach_disconnected", base=BASE):
    return "abi <abi/3.0>,\nprofile %s flags=(%s) {%s%s}\n" % (name, flags, base, rules)


def supply_flag():
    """The dbus feature flag: a copy of the kernel's features tree with
    dbus/mask, bound over apparmorfs' features directory."""
    if os.path.exists(os.path.join(AAFS, "features", "dbus")):
        return
    if not os.path.exists(FEATURES):
        shutil.copytree(os.path.join(AAFS, "features"), FEATURES)
        os.makedirs(os.path.join(FEATURES, "dbus"))
        with open(os.path.join(FEATURES, "dbus", "mask"), "w") as f:
            f.write("acquire send receive\n")
    subprocess.run(["mount", "--bind", FEATURES, os.path.join(AAFS, "features")], check=True)


def remove_flag():
    while os.path.exists(os.path.join(AAFS, "features", "dbus")):
        subprocess.run(["umount", os.path.join(AAFS, "features")], check=True)


def load_profiles():
    """The profiles, compiled against the features with the flag (which is
    taken away again)."""
    if not os.path.ismount("/sys/kernel/security"):
        subprocess.run(["mount", "-t", "securityfs", "securityfs", "/sys/kernel/security"],
                       check=True)
    with open("/sys/module/apparmor/parameters/enabled") as f:
        if f.read().strip() != "Y":
            sys.exit("apparmor_matrix: AppArmor is not enabled in this kernel")
    remove_flag()
    supply_flag()
    texts = [profile_text(n, r) for n, r in PROFILES.items()]
    texts.append(profile_text(COMPLAIN, PROFILES["bus1test-client"],
                              "attach_disconnected,complain"))
    texts += [profile_text(n, r, "attach_disconnected" + f, NO_DRIVER)
              for n, (r, f) in DRIVER_PROFILES.items()]
    for i, text in enumerate(texts):
        path = os.path.join(WORK, "profile-%d" % i)
        with open(path, "w") as f:
            f.write(text)
        subprocess.run(["apparmor_parser", "-M", FEATURES, "-r", path], check=True)
    remove_flag()


def write_config(bus_dir, mode="enabled"):
    svcdir = os.path.join(bus_dir, "services")
    os.makedirs(svcdir, exist_ok=True)
    # Started under its profile, as the .service file says it will be.
    with open(os.path.join(svcdir, "act.service"), "w") as f:
        f.write("[D-BUS Service]\nName=org.bus1.Lsm.Activatable\n"
                "Exec=/usr/bin/aa-exec -p bus1test-svc -- %s %s --activated "
                "org.bus1.Lsm.Activatable\nAssumedAppArmorLabel=bus1test-svc\n" % (PY, PEER))
    # The client may not send to this label: the service must never start.
    with open(os.path.join(svcdir, "act2.service"), "w") as f:
        f.write("[D-BUS Service]\nName=org.bus1.Lsm.Activatable2\n"
                "Exec=/bin/sh -c 'touch %s/started2; sleep 5'\n"
                "AssumedAppArmorLabel=bus1test-other\n" % bus_dir)
    return write_bus_config(bus_dir, svcdir, '<apparmor mode="%s"/>' % mode)


# ---------------------------------------------------------------- clients

def aa_exec(profile):
    return ["aa-exec", "-p", profile, "--"] if profile else None


# ------------------------------------------------------------------ cases

def run_cases(address, uid, bus_dir, native=None, reexec=None):
    """Every case on one bus. Returns [(name, outcome, expected)]. With
    @native (lsm-native), the service, client and deaf roles are native.
    @reexec: re-execute the bus in the middle (bus1-broker's SIGUSR2)."""
    out = []
    clients = []

    def client(profile, refusable=False):
        roles = ("bus1test-svc", "bus1test-client", "bus1test-deaf") + tuple(DRIVER_PROFILES)
        c = Client(address, aa_exec(profile), uid, native if profile in roles else None,
                   refusable)
        clients.append(c)
        return c

    def case(name, outcome, expected):
        out.append((name, outcome, expected))

    try:
        svc = client("bus1test-svc")
        cli = client("bus1test-client")
        deaf = client("bus1test-deaf")
        unconf = client(None)
        complain = client(COMPLAIN)

        case("features: AppArmor listed", "AppArmor" in unconf.do("features"), True)
        case("own: allowed by the profile", cli.do("own", name="org.bus1.Lsm.ClientName"),
             "reply:1")
        case("own: denied by the profile", cli.do("own", name="org.bus1.Lsm.Other"), AD)
        case("own: unconfined", unconf.do("own", name="org.bus1.Lsm.Other"), "reply:1")
        case("own: the service's name", svc.do("own", name=SVC), "reply:1")
        case("own: deaf service", deaf.do("own", name="org.bus1.Lsm.Deaf"), "reply:1")

        case("send: allowed path, interface, member, peer label", call(cli, SVC), "reply")
        case("send: the call reached the service",
             svc.do("seen"), [["call", LSM_PATH, LSM_IFACE, "Allowed"]])
        case("send: denied by member", call(cli, SVC, member="Denied"), AD)
        case("send: denied by interface", call(cli, SVC, iface="org.bus1.Other"), AD)
        case("send: denied by path", call(cli, SVC, path="/org/bus1/Other"), AD)
        case("send: denied calls never reached the service", svc.do("seen"), [])
        case("send: denied by the peer's label (unconfined owner)",
             call(cli, "org.bus1.Lsm.Other"), AD)
        case("send: to the unique name of a peer labelled bus1test-svc",
             call(cli, svc.ready["ready"]), "reply")
        case("send: unconfined to a confined service", call(unconf, SVC, member="Any"), "reply")
        svc.do("seen")
        case("receive: denied by the receiver's profile",
             call(unconf, "org.bus1.Lsm.Deaf"), AD)
        case("receive: the deaf service got nothing", deaf.do("seen"), [])
        case("complain mode: a denied call goes through",
             call(complain, SVC, member="Denied"), "reply")
        svc.do("seen")

        # bus1-broker re-executes here (dbus-daemon cannot): the labels come
        # with the connections' state, the mediation goes on.
        if reexec:
            reexec()
        case("after a re-exec: an allowed call", call(cli, SVC), "reply")
        case("after a re-exec: a denied call", call(cli, SVC, member="Denied"), AD)
        case("after a re-exec: a denied receiver", call(unconf, "org.bus1.Lsm.Deaf"), AD)
        case("after a re-exec: what reached the services", svc.do("seen") + deaf.do("seen"),
             [["call", LSM_PATH, LSM_IFACE, "Allowed"]])

        # Broadcast signals: each receiver decided alone, silently.
        rule = "type='signal',interface='org.bus1.Lsm'"
        for c in (cli, deaf, unconf):
            c.do("match", rule=rule)
        svc.do("emit", path=SIGNAL_PATH, iface=LSM_IFACE, member="Ping")
        sig = [["signal", SIGNAL_PATH, LSM_IFACE, "Ping"]]
        case("signal: a receiver allowed by label", cli.do("seen"), sig)
        case("signal: a receiver whose profile denies it", deaf.do("seen"), [])
        case("signal: an unconfined receiver", unconf.do("seen"), sig)
        cli.do("emit", path=SIGNAL_PATH, iface=LSM_IFACE, member="Forbidden")
        case("signal: a sender whose profile denies it reaches nobody",
             unconf.do("seen"), [])

        # Eavesdropping (privileged callers only, whatever the LSM says).
        eaves = client("bus1test-eaves")
        eaves_ok = client("bus1test-eaves-ok")
        priv = uid == 0
        case("eavesdrop: AddMatch eavesdrop=true denied by the profile",
             eaves.do("match", rule="eavesdrop=true,interface='org.bus1.Lsm'"), AD)
        case("eavesdrop: AddMatch eavesdrop=true allowed by the profile",
             eaves_ok.do("match", rule="eavesdrop=true,interface='org.bus1.Lsm'"),
             "reply" if priv else AD)
        call(unconf, SVC, member="Overheard")
        case("eavesdrop: what the allowed eavesdropper overheard", eaves_ok.do("seen"),
             [["call", LSM_PATH, LSM_IFACE, "Overheard"]] if priv else [])
        svc.do("seen")
        case("eavesdrop: BecomeMonitor denied by the profile", eaves.do("monitor"), AD)
        case("eavesdrop: BecomeMonitor allowed by the profile", eaves_ok.do("monitor"),
             "reply" if priv else AD)

        # The direct path (native clients of bus1-broker; a no-op on sockets):
        # a confined caller still goes through its profile.
        case("direct: asked for", cli.do("direct"), "reply")
        case("direct: an allowed call", call(cli, SVC), "reply")
        case("direct: a denied call", call(cli, SVC, member="Denied"), AD)
        case("direct: what reached the service", svc.do("seen"),
             [["call", LSM_PATH, LSM_IFACE, "Allowed"]])

        # The driver (issue 39): every message to it is asked against the
        # bus' own label, Hello first; a client refused Hello is refused at
        # connect, as dbus-daemon refuses it, with its record.
        svc.do("seen")
        nodriver = client("bus1test-nodriver", refusable=True)
        case("driver: no rule for it, Hello refused at connect", nodriver.connected,
             "refused: " + AD)
        nodbus = client("bus1test-nodbus", refusable=True)
        case("driver: no dbus rules at all, Hello refused at connect", nodbus.connected,
             "refused: " + AD)
        hello = client("bus1test-helloonly", refusable=True)
        case("driver: Hello alone allowed, connected", hello.connected, "connected")
        if hello.connected == "connected":
            case("driver: Hello alone allowed, a call to the service", call(hello, SVC),
                 "reply")
            case("driver: Hello alone allowed, RequestName denied",
                 hello.do("own", name="org.bus1.Lsm.ClientName"), AD)
            case("driver: Hello alone allowed, AddMatch denied",
                 hello.do("match", rule="type='signal',interface='org.bus1.Lsm'"), AD)
        nd_complain = client("bus1test-nodriver-complain", refusable=True)
        case("driver: no rule for it in complain mode, connected", nd_complain.connected,
             "connected")
        if nd_complain.connected == "connected":
            case("driver: complain mode, a call to the service", call(nd_complain, SVC),
                 "reply")
        case("driver: what reached the service", svc.do("seen"),
             [["call", LSM_PATH, LSM_IFACE, "Allowed"]] * 2)
        # A message to the driver before Hello is asked of the profile
        # first (denied: AccessDenied with a record); allowed, the bus' own
        # rule refuses it (AccessDenied, no record) and Hello may follow.
        case("driver: GetId before Hello, no rule for the driver",
             before_hello(address, aa_exec("bus1test-nodriver"), uid),
             "GetId: %s, then Hello: %s" % (AD, AD))
        case("driver: GetId before Hello, Hello alone allowed",
             before_hello(address, aa_exec("bus1test-helloonly"), uid),
             "GetId: %s, then Hello: reply" % AD)
        case("driver: GetId before Hello, the driver allowed",
             before_hello(address, aa_exec("bus1test-client"), uid),
             "GetId: %s, then Hello: reply" % AD)

        # Activation: the sender is asked against AssumedAppArmorLabel=.
        case("activation: allowed by the assumed label",
             call(cli, "org.bus1.Lsm.Activatable"), "reply")
        case("activation: denied by the assumed label",
             call(cli, "org.bus1.Lsm.Activatable2"), AD)
        time.sleep(0.5)
        case("activation: the denied service was never started",
             os.path.exists(os.path.join(bus_dir, "started2")), False)
    finally:
        for c in clients:
            c.close()
    return out


def start_only(argv, bus_dir, shim, mode):
    """Whether a bus with <apparmor mode=MODE/> starts and stays: "started",
    or its exit status and whether it said AppArmor was required. (dbus-daemon
    prints its address before it looks at AppArmor, bus1-broker after.)"""
    os.makedirs(bus_dir)
    conf = write_config(bus_dir, mode)
    bus = subprocess.Popen(argv + ["--config-file=" + conf, "--nofork", "--print-address=1"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           env=dict(os.environ, LD_PRELOAD=shim))
    bus.stdout.readline()
    try:
        bus.wait(2)
    except subprocess.TimeoutExpired:
        bus.terminate()
        bus.wait(10)
        return "started"
    refused = "AppArmor mediation required but not present" in bus.stderr.read()
    return "exit %d%s" % (bus.returncode, ", AppArmor required but not present" if refused else "")


def mode_cases(argv, uid, bus_dir, shim, flag):
    """<apparmor mode=...>: required without and with the dbus flag (@flag:
    supply it in between), disabled."""
    out = [("mode required, kernel without the dbus flag",
            start_only(argv, bus_dir + "-required0", shim, "required"),
            "exit 1, AppArmor required but not present")]
    flag()
    out.append(("mode required, the flag supplied",
                start_only(argv, bus_dir + "-required1", shim, "required"), "started"))
    # Disabled: the bus asks nothing; the profile's denials do not apply.
    os.makedirs(bus_dir + "-disabled")
    conf = write_config(bus_dir + "-disabled", "disabled")
    bus = subprocess.Popen(argv + ["--config-file=" + conf, "--nofork", "--print-address=1"],
                           stdout=subprocess.PIPE, text=True,
                           env=dict(os.environ, LD_PRELOAD=shim))
    try:
        address = bus.stdout.readline().strip()
        cli = Client(address, aa_exec("bus1test-client"), uid)
        out.append(("mode disabled: AppArmor not listed",
                    "AppArmor" in cli.do("features"), False))
        out.append(("mode disabled: a name the profile denies",
                    cli.do("own", name="org.bus1.Lsm.Other"), "reply:1"))
        cli.close()
    finally:
        bus.terminate()
        bus.wait(10)
    return out


def run_bus(argv, uid, bus_dir, shim, native=None):
    os.makedirs(bus_dir)
    return lsm_common.run_bus(argv, bus_dir, write_config(bus_dir),
                              lambda address, reexec: run_cases(address, uid, bus_dir, native,
                                                                reexec),
                              'apparmor="', env={"LD_PRELOAD": shim})


def main():
    (broker, shim), native, uid = lsm_common.parse_args(sys.argv[1:], 2)
    shutil.rmtree(WORK, ignore_errors=True)
    os.makedirs(WORK, mode=0o755)
    load_profiles()

    # The modes, each bus from a kernel without the flag on; the flag stays.
    ref = mode_cases([DAEMON], uid, os.path.join(WORK, "dbus-daemon-mode"), shim, supply_flag)
    remove_flag()
    modes = mode_cases([broker], uid, os.path.join(WORK, "bus1-broker-mode"), shim,
                       supply_flag)
    ref += run_bus([DAEMON], uid, os.path.join(WORK, "dbus-daemon"), shim)
    runs = [("bus1-broker",
             modes + run_bus([broker], uid, os.path.join(WORK, "bus1-broker"), shim))]
    if native:
        # The mode cases are socket clients' only: the same rows again.
        runs.append(("bus1-broker, native clients",
                     modes + run_bus([broker], uid, os.path.join(WORK, "bus1-native"), shim,
                                     native)))
    else:
        print("# no /dev/bus1 or no lsm-native: native clients not tried")

    failures = compare("AppArmor matrix, clients as uid %d" % uid, ref, runs)
    remove_flag()
    print("# %d case(s) on each bus, %d failure(s)" % (len(ref), failures))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
