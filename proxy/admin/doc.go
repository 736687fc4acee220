// Package admin is sds-proxy's admin port: health and readiness probes,
// the Prometheus metrics, the /status document and the dashboard, all
// read-only, and, only when a bearer token is configured, the operators'
// switches (POST and DELETE /points/{name}/force). It reads the request
// path through Points (a *proxy.Handler is one) and writes to it only
// through Switches; the request path does not know it exists.
package admin
