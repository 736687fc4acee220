// Package events keeps the recent history of what happened to the proxy's
// points and config: trips, delays, probes, recoveries, reloads and
// rejected reloads, in bounded memory that folds a point's repeated events
// so as to keep the last Span, for the admin port to show. It
// imports nothing of sds-proxy; the request path and cmd add, the admin
// port reads.
package events
