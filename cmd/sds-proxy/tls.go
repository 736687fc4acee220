package main

// isReady is /readyz: serving, and with ACME a certificate cached for
// every domain.
func (in *instance) isReady() bool {
	return in.ready.Load() && (in.certReady == nil || in.certReady())
}
