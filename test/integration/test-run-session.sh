#!/bin/bash
# The done criterion: dbus-run-session starts bus1-broker in place of
# dbus-daemon, and a libdbus, a GDBus and an sd-bus client own names, call
# each other, receive each other's signals through match rules, and see
# NameOwnerChanged when one of them (EXITER) exits.
#
#   test-run-session.sh BUS_BINARY PEER_DIR EXITER_IMPL
#
# PEER_WRAPPER, if set, is put before each peer program (e.g. valgrind and
# its options, as test/stress/run-under-valgrind.sh does).
set -u
bus="${BUS_BINARY_OVERRIDE:-$1}"
dir=$2
case "$3" in
libdbus) exiter=org.bus1.PeerLibdbus ;;
gdbus) exiter=org.bus1.PeerGdbus ;;
sdbus) exiter=org.bus1.PeerSdbus ;;
*) echo "unknown exiter $3" >&2; exit 2 ;;
esac
L=org.bus1.PeerLibdbus G=org.bus1.PeerGdbus S=org.bus1.PeerSdbus
PEER_WRAPPER=${PEER_WRAPPER:-}
export dir L G S exiter PEER_WRAPPER
unset DBUS_SESSION_BUS_ADDRESS
exec timeout 60 dbus-run-session --dbus-daemon="$bus" -- sh -c '
    case "$DBUS_SESSION_BUS_ADDRESS" in unix:*) ;; *) echo "no bus address" >&2; exit 1 ;; esac
    $PEER_WRAPPER "$dir/test-peer-libdbus" $L $G $S $exiter & p1=$!
    $PEER_WRAPPER "$dir/test-peer-gdbus" $G $L $S $exiter & p2=$!
    $PEER_WRAPPER "$dir/test-peer-sdbus" $S $L $G $exiter & p3=$!
    rc=0
    wait $p1 || rc=1
    wait $p2 || rc=1
    wait $p3 || rc=1
    exit $rc'
