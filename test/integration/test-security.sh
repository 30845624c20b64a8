#!/bin/bash
# SELinux / AppArmor configuration on a kernel whose AppArmor does not
# mediate D-Bus (no features/dbus in apparmorfs, as on Debian's kernels; the
# mediation itself is test/lsm/'s, in a guest):
#  - <apparmor mode="required"/> stops the bus at start-up with dbus-daemon's
#    message, as dbus-daemon does;
#  - mode="enabled" / "disabled" start;
#  - <include if_selinux_enabled="yes"> is skipped while SELinux is off (the
#    included file here is not even valid XML); <selinux><associate/> is
#    accepted.
# Where /usr/bin/dbus-daemon exists and the kernel has no AppArmor, it must
# agree on every start/refuse verdict.
#
#   test-security.sh BUS_BINARY
set -u
bus=$1
dir=$(mktemp -d /tmp/bus1-lsm.XXXXXX)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

conf() {  # conf NAME EXTRA-XML
    cat >"$dir/$1.conf" <<EOF2
<busconfig>
  <type>session</type>
  <listen>unix:tmpdir=$dir</listen>
  $2
  <policy context="default"><allow send_destination="*" eavesdrop="true"/><allow eavesdrop="true"/><allow own="*"/></policy>
</busconfig>
EOF2
}
echo "<busconfig><broken" >"$dir/broken.xml"
conf required '<apparmor mode="required"/>'
conf enabled '<apparmor mode="enabled"/>'
conf disabled '<apparmor mode="disabled"/>'
conf selinux "<include if_selinux_enabled=\"yes\">$dir/broken.xml</include>
  <selinux><associate own=\"org.example.A\" context=\"system_u:object_r:a_t:s0\"/></selinux>"

# starts BINARY CONF: 0 if the bus came up (then it is stopped), 1 if it exited
starts() {
    local out="$dir/out.$$" pid
    "$1" --config-file="$2" --nofork --print-address=1 >"$out" 2>"$dir/err" &
    pid=$!
    for _ in $(seq 100); do
        kill -0 "$pid" 2>/dev/null || break
        [ -s "$out" ] && timeout 5 dbus-send --bus="$(head -n1 "$out")" --print-reply \
            --dest=org.freedesktop.DBus / org.freedesktop.DBus.GetId >/dev/null 2>&1 && {
            kill "$pid"; wait "$pid"; return 0; }
        sleep 0.05
    done
    kill "$pid" 2>/dev/null
    wait "$pid"
    return 1
}

if [ -e /sys/kernel/security/apparmor/features/dbus ]; then
    echo "this kernel's AppArmor mediates D-Bus: mode=required not tried here"
else
    starts "$bus" "$dir/required.conf" && fail "mode=required started"
    grep -q "AppArmor mediation required but not present" "$dir/err" ||
        fail "mode=required message: $(cat "$dir/err")"
fi
for c in enabled disabled selinux; do
    starts "$bus" "$dir/$c.conf" || fail "$c.conf did not start: $(cat "$dir/err")"
done

if [ -x /usr/bin/dbus-daemon ] && ! [ -e /sys/kernel/security/apparmor ] &&
    ! [ -e /sys/fs/selinux/enforce ]; then
    starts /usr/bin/dbus-daemon "$dir/required.conf" && fail "dbus-daemon: mode=required started"
    for c in enabled disabled selinux; do
        starts /usr/bin/dbus-daemon "$dir/$c.conf" || fail "dbus-daemon: $c.conf did not start"
    done
    echo "dbus-daemon agrees"
fi
echo "security ok"
