/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/**
 * DOC: D-Bus protocol constants
 *
 * Type codes, header fields, message types and flags, the limits of the
 * specification, the standard error names and the codes of the
 * org.freedesktop.DBus driver methods.
 *
 * Everything carries the DC_ ("dbus-compat") prefix rather than DBUS_ so that
 * this header can be included next to libdbus' <dbus/dbus.h> (the reference
 * tests do that), whose macros use the DBUS_ names.
 *
 * Also defines enum dc_invalid: the POSITIVE codes every parsing function of
 * dbus-compat returns for "the peer sent something invalid". Negative errno
 * values are reserved for local failures (-ENOMEM) and API misuse (-EINVAL).
 */

#include <stdint.h>

/* Type codes, as they appear in signatures. */
enum {
	DC_TYPE_INVALID		= 0,
	DC_TYPE_BYTE		= 'y',
	DC_TYPE_BOOLEAN		= 'b',
	DC_TYPE_INT16		= 'n',
	DC_TYPE_UINT16		= 'q',
	DC_TYPE_INT32		= 'i',
	DC_TYPE_UINT32		= 'u',
	DC_TYPE_INT64		= 'x',
	DC_TYPE_UINT64		= 't',
	DC_TYPE_DOUBLE		= 'd',
	DC_TYPE_STRING		= 's',
	DC_TYPE_OBJECT_PATH	= 'o',
	DC_TYPE_SIGNATURE	= 'g',
	DC_TYPE_UNIX_FD		= 'h',
	DC_TYPE_ARRAY		= 'a',
	DC_TYPE_VARIANT		= 'v',
	DC_TYPE_STRUCT		= 'r',	/* never in signatures; '(' ... ')' are used */
	DC_TYPE_DICT_ENTRY	= 'e',	/* never in signatures; '{' ... '}' are used */
	DC_STRUCT_BEGIN		= '(',
	DC_STRUCT_END		= ')',
	DC_DICT_ENTRY_BEGIN	= '{',
	DC_DICT_ENTRY_END	= '}',
};

/* Byte order marks (first header byte). */
enum {
	DC_LITTLE_ENDIAN	= 'l',
	DC_BIG_ENDIAN		= 'B',
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
	DC_NATIVE_ENDIAN	= 'B',
#else
	DC_NATIVE_ENDIAN	= 'l',
#endif
};

#define DC_PROTOCOL_VERSION 1

/* Message types (second header byte). Unknown types are not invalid. */
enum {
	DC_MESSAGE_INVALID	= 0,
	DC_MESSAGE_METHOD_CALL	= 1,
	DC_MESSAGE_METHOD_RETURN = 2,
	DC_MESSAGE_ERROR	= 3,
	DC_MESSAGE_SIGNAL	= 4,
};

/* Message flags (third header byte). Unknown flags must be ignored. */
enum {
	DC_FLAG_NO_REPLY_EXPECTED		= 0x1,
	DC_FLAG_NO_AUTO_START			= 0x2,
	DC_FLAG_ALLOW_INTERACTIVE_AUTHORIZATION	= 0x4,
};

/* Header field codes, and the variant type each must carry. */
enum {
	DC_FIELD_INVALID	= 0,
	DC_FIELD_PATH		= 1,	/* o */
	DC_FIELD_INTERFACE	= 2,	/* s */
	DC_FIELD_MEMBER		= 3,	/* s */
	DC_FIELD_ERROR_NAME	= 4,	/* s */
	DC_FIELD_REPLY_SERIAL	= 5,	/* u */
	DC_FIELD_DESTINATION	= 6,	/* s */
	DC_FIELD_SENDER		= 7,	/* s */
	DC_FIELD_SIGNATURE	= 8,	/* g */
	DC_FIELD_UNIX_FDS	= 9,	/* u */
	DC_FIELD_MAX		= DC_FIELD_UNIX_FDS,	/* the fields struct message exposes */
	/*
	 * o: reserved by libdbus >= 1.13 for a bus-added field; libdbus rejects
	 * messages where it has another type, so it is type-checked, then
	 * treated like an unknown field (ignored, dropped when stitching).
	 */
	DC_FIELD_CONTAINER_INSTANCE = 10,
};

/* Limits of the specification. */
#define DC_MAX_MESSAGE_SIZE	(UINT32_C(1) << 27)	/* 128 MiB, header + padding + body */
#define DC_MAX_ARRAY_SIZE	(UINT32_C(1) << 26)	/* 64 MiB of array data */
#define DC_MAX_SIGNATURE_LENGTH	255
#define DC_MAX_NAME_LENGTH	255	/* bus, interface, member and error names */
#define DC_MAX_ARRAY_DEPTH	32	/* nested arrays in one signature */
#define DC_MAX_STRUCT_DEPTH	32	/* nested structs + dict entries in one signature */
#define DC_MAX_TOTAL_DEPTH	64	/* nested containers in a value, variants included */
#define DC_MAX_UNIX_FDS		253	/* SCM_MAX_FD: what one sendmsg() can carry */
#define DC_FIXED_HEADER_SIZE	16	/* yyyyuu + the length of the field array */
#define DC_MAX_MATCH_ARGS	64	/* arg0 .. arg63 in match rules */

/* The bus driver and other well-known names, paths and interfaces. */
#define DC_SERVICE_DBUS		"org.freedesktop.DBus"
#define DC_PATH_DBUS		"/org/freedesktop/DBus"
#define DC_INTERFACE_DBUS	"org.freedesktop.DBus"
#define DC_INTERFACE_MONITORING	"org.freedesktop.DBus.Monitoring"
#define DC_INTERFACE_STATS	"org.freedesktop.DBus.Debug.Stats"
#define DC_INTERFACE_VERBOSE	"org.freedesktop.DBus.Verbose"
#define DC_INTERFACE_INTROSPECTABLE "org.freedesktop.DBus.Introspectable"
#define DC_INTERFACE_PROPERTIES	"org.freedesktop.DBus.Properties"
#define DC_INTERFACE_PEER	"org.freedesktop.DBus.Peer"
#define DC_INTERFACE_CONTAINERS1 "org.freedesktop.DBus.Containers1"
/* Reserved for libdbus' in-process messages; a peer may never send them. */
#define DC_PATH_LOCAL		"/org/freedesktop/DBus/Local"
#define DC_INTERFACE_LOCAL	"org.freedesktop.DBus.Local"

/* Standard error names (string literals: DC_ERROR_PREFIX "Failed" concatenates). */
#define DC_ERROR_PREFIX					"org.freedesktop.DBus.Error."
#define DC_ERROR_FAILED				DC_ERROR_PREFIX "Failed"
#define DC_ERROR_NO_MEMORY			DC_ERROR_PREFIX "NoMemory"
#define DC_ERROR_SERVICE_UNKNOWN		DC_ERROR_PREFIX "ServiceUnknown"
#define DC_ERROR_NAME_HAS_NO_OWNER		DC_ERROR_PREFIX "NameHasNoOwner"
#define DC_ERROR_NO_REPLY			DC_ERROR_PREFIX "NoReply"
#define DC_ERROR_IO_ERROR			DC_ERROR_PREFIX "IOError"
#define DC_ERROR_BAD_ADDRESS			DC_ERROR_PREFIX "BadAddress"
#define DC_ERROR_NOT_SUPPORTED			DC_ERROR_PREFIX "NotSupported"
#define DC_ERROR_LIMITS_EXCEEDED		DC_ERROR_PREFIX "LimitsExceeded"
#define DC_ERROR_ACCESS_DENIED			DC_ERROR_PREFIX "AccessDenied"
#define DC_ERROR_AUTH_FAILED			DC_ERROR_PREFIX "AuthFailed"
#define DC_ERROR_NO_SERVER			DC_ERROR_PREFIX "NoServer"
#define DC_ERROR_TIMEOUT			DC_ERROR_PREFIX "Timeout"
#define DC_ERROR_NO_NETWORK			DC_ERROR_PREFIX "NoNetwork"
#define DC_ERROR_ADDRESS_IN_USE			DC_ERROR_PREFIX "AddressInUse"
#define DC_ERROR_DISCONNECTED			DC_ERROR_PREFIX "Disconnected"
#define DC_ERROR_INVALID_ARGS			DC_ERROR_PREFIX "InvalidArgs"
#define DC_ERROR_FILE_NOT_FOUND			DC_ERROR_PREFIX "FileNotFound"
#define DC_ERROR_FILE_EXISTS			DC_ERROR_PREFIX "FileExists"
#define DC_ERROR_UNKNOWN_METHOD			DC_ERROR_PREFIX "UnknownMethod"
#define DC_ERROR_UNKNOWN_OBJECT			DC_ERROR_PREFIX "UnknownObject"
#define DC_ERROR_UNKNOWN_INTERFACE		DC_ERROR_PREFIX "UnknownInterface"
#define DC_ERROR_UNKNOWN_PROPERTY		DC_ERROR_PREFIX "UnknownProperty"
#define DC_ERROR_PROPERTY_READ_ONLY		DC_ERROR_PREFIX "PropertyReadOnly"
#define DC_ERROR_TIMED_OUT			DC_ERROR_PREFIX "TimedOut"
#define DC_ERROR_MATCH_RULE_NOT_FOUND		DC_ERROR_PREFIX "MatchRuleNotFound"
#define DC_ERROR_MATCH_RULE_INVALID		DC_ERROR_PREFIX "MatchRuleInvalid"
#define DC_ERROR_SPAWN_EXEC_FAILED		DC_ERROR_PREFIX "Spawn.ExecFailed"
#define DC_ERROR_SPAWN_FORK_FAILED		DC_ERROR_PREFIX "Spawn.ForkFailed"
#define DC_ERROR_SPAWN_CHILD_EXITED		DC_ERROR_PREFIX "Spawn.ChildExited"
#define DC_ERROR_SPAWN_CHILD_SIGNALED		DC_ERROR_PREFIX "Spawn.ChildSignaled"
#define DC_ERROR_SPAWN_FAILED			DC_ERROR_PREFIX "Spawn.Failed"
#define DC_ERROR_SPAWN_SETUP_FAILED		DC_ERROR_PREFIX "Spawn.FailedToSetup"
#define DC_ERROR_SPAWN_CONFIG_INVALID		DC_ERROR_PREFIX "Spawn.ConfigInvalid"
#define DC_ERROR_SPAWN_SERVICE_INVALID		DC_ERROR_PREFIX "Spawn.ServiceNotValid"
#define DC_ERROR_SPAWN_SERVICE_NOT_FOUND	DC_ERROR_PREFIX "Spawn.ServiceNotFound"
#define DC_ERROR_SPAWN_PERMISSIONS_INVALID	DC_ERROR_PREFIX "Spawn.PermissionsInvalid"
#define DC_ERROR_SPAWN_FILE_INVALID		DC_ERROR_PREFIX "Spawn.FileInvalid"
#define DC_ERROR_SPAWN_NO_MEMORY		DC_ERROR_PREFIX "Spawn.NoMemory"
#define DC_ERROR_UNIX_PROCESS_ID_UNKNOWN	DC_ERROR_PREFIX "UnixProcessIdUnknown"
#define DC_ERROR_INVALID_SIGNATURE		DC_ERROR_PREFIX "InvalidSignature"
#define DC_ERROR_INVALID_FILE_CONTENT		DC_ERROR_PREFIX "InvalidFileContent"
#define DC_ERROR_SELINUX_SECURITY_CONTEXT_UNKNOWN \
	DC_ERROR_PREFIX "SELinuxSecurityContextUnknown"
#define DC_ERROR_ADT_AUDIT_DATA_UNKNOWN		DC_ERROR_PREFIX "AdtAuditDataUnknown"
#define DC_ERROR_OBJECT_PATH_IN_USE		DC_ERROR_PREFIX "ObjectPathInUse"
#define DC_ERROR_INCONSISTENT_MESSAGE		DC_ERROR_PREFIX "InconsistentMessage"
#define DC_ERROR_INTERACTIVE_AUTHORIZATION_REQUIRED \
	DC_ERROR_PREFIX "InteractiveAuthorizationRequired"
#define DC_ERROR_NOT_CONTAINER			DC_ERROR_PREFIX "NotContainer"

/* RequestName() flags and replies; ReleaseName() and StartServiceByName() replies. */
#define DC_NAME_FLAG_ALLOW_REPLACEMENT		0x1
#define DC_NAME_FLAG_REPLACE_EXISTING		0x2
#define DC_NAME_FLAG_DO_NOT_QUEUE		0x4

#define DC_REQUEST_NAME_REPLY_PRIMARY_OWNER	1
#define DC_REQUEST_NAME_REPLY_IN_QUEUE		2
#define DC_REQUEST_NAME_REPLY_EXISTS		3
#define DC_REQUEST_NAME_REPLY_ALREADY_OWNER	4

#define DC_RELEASE_NAME_REPLY_RELEASED		1
#define DC_RELEASE_NAME_REPLY_NON_EXISTENT	2
#define DC_RELEASE_NAME_REPLY_NOT_OWNER		3

#define DC_START_REPLY_SUCCESS			1
#define DC_START_REPLY_ALREADY_RUNNING		2

/**
 * enum dc_invalid - why received data is not valid D-Bus
 *
 * Returned as POSITIVE values by the reader (marshal.h), by
 * message_frame_size() and message_parse() (message.h). A caller that gets one
 * of these for a message from a peer treats it as a protocol violation
 * (dbus-daemon disconnects the peer). 0 (_DC_E_SUCCESS) is "valid" (the
 * one error rule, util/error.h). dc_invalid_to_string() gives a short
 * English description.
 */
enum dc_invalid {
	_DC_E_SUCCESS,
	/* values (reader) */
	DC_E_TRUNCATED,			/* data ends in the middle of a value */
	DC_E_PADDING,			/* alignment padding is not zero */
	DC_E_BOOLEAN,			/* boolean that is neither 0 nor 1 */
	DC_E_STRING_NUL,		/* string not NUL-terminated */
	DC_E_UTF8,			/* string not valid UTF-8, or interior NUL */
	DC_E_OBJECT_PATH,		/* invalid object path value */
	DC_E_SIGNATURE,			/* invalid signature (value or type string) */
	DC_E_ARRAY_TOO_BIG,		/* array length above DC_MAX_ARRAY_SIZE */
	DC_E_ARRAY_LENGTH,		/* array length does not end on an element boundary */
	DC_E_VARIANT_SIGNATURE,		/* variant signature not one complete type */
	DC_E_NESTING,			/* more than DC_MAX_TOTAL_DEPTH containers */
	DC_E_UNIX_FD_INDEX,		/* 'h' value >= number of fds (no longer reported:
					 * 'h' is opaque, as for dbus-daemon) */
	DC_E_TRAILING,			/* bytes left after the last value */
	DC_E_TYPE,			/* reader asked for another type than the signature's */
	/* framing and header (message) */
	DC_E_NEED_MORE,			/* fewer than 16 bytes to frame (not an error) */
	DC_E_ENDIAN,			/* first byte neither 'l' nor 'B' */
	DC_E_VERSION,			/* protocol version is not 1 */
	DC_E_MESSAGE_TOO_BIG,		/* total size above DC_MAX_MESSAGE_SIZE */
	DC_E_SIZE_MISMATCH,		/* buffer size differs from the size in the header */
	DC_E_MESSAGE_TYPE,		/* message type 0 (INVALID) */
	DC_E_SERIAL,			/* serial (or REPLY_SERIAL) is 0 */
	DC_E_FIELD_CODE,		/* header field code 0 (INVALID) */
	DC_E_FIELD_TYPE,		/* known header field with the wrong variant type */
	DC_E_FIELD_DUPLICATE,		/* a header field appears twice */
	DC_E_FIELD_VALUE,		/* invalid name, path or interface in a header field */
	DC_E_MISSING_PATH,
	DC_E_MISSING_INTERFACE,
	DC_E_MISSING_MEMBER,
	DC_E_MISSING_ERROR_NAME,
	DC_E_MISSING_REPLY_SERIAL,
	DC_E_LOCAL_PATH,		/* PATH is /org/freedesktop/DBus/Local */
	DC_E_LOCAL_INTERFACE,		/* INTERFACE is org.freedesktop.DBus.Local */
	DC_E_UNIX_FDS,			/* UNIX_FDS field differs from the fds received */
	DC_E_BODY,			/* non-empty body but no SIGNATURE field */
	_DC_E_MAX,
};

/* Short English description of a dc_invalid code (or "unknown"). */
const char *dc_invalid_to_string(int code);
