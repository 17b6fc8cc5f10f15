// CMosquitto: the whole of libmosquitto (the Eclipse Mosquitto project's C client) as MQTTKit
// sees it. Only MQTTKit imports this module; it is never part of the public surface.
#ifndef CMOSQUITTO_SHIM_H
#define CMOSQUITTO_SHIM_H

#include <mosquitto.h>
#include <sys/eventfd.h>

// The network thread's wake-up (an eventfd polled next to the client's socket).
static inline int cmosq_wakefd(void) { return eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK); }

// Error codes (enum mosq_err_t), re-declared as plain ints for Swift's switches.
static const int CMOSQ_ERR_SUCCESS = MOSQ_ERR_SUCCESS;
static const int CMOSQ_ERR_NO_CONN = MOSQ_ERR_NO_CONN;
static const int CMOSQ_ERR_CONN_LOST = MOSQ_ERR_CONN_LOST;
static const int CMOSQ_ERR_ERRNO = MOSQ_ERR_ERRNO;
static const int CMOSQ_ERR_TLS = MOSQ_ERR_TLS;

// The level of libmosquitto's log lines that say why a connection failed (OpenSSL's errors).
static const int CMOSQ_LOG_ERR = MOSQ_LOG_ERR;

// Protocol versions for MOSQ_OPT_PROTOCOL_VERSION.
static const int CMOSQ_PROTOCOL_V311 = MQTT_PROTOCOL_V311;

#endif
