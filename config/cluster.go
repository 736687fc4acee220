package config

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"
)

// Cluster is the Redis that the points' shared token buckets live in
// (docs/fleet.md): top-level cluster:, whose keys (keys.go) are its fields.
// "" is absent: the default user, no password, no Sentinel. No request
// ever waits on Redis: calls are made in the background.
type Cluster struct {
	// Addresses are host:port addresses, at least one and at most 64.
	Addresses []string
	Username  string
	// PasswordFile is absolute after Parse. The proxy reads it for every
	// new connection; the config holds no password.
	PasswordFile string
	// TLS, when not nil, speaks TLS to Redis.
	TLS *ClusterTLS
	// DB is the database number, 0 or more; a Redis Cluster has only 0.
	DB         int
	MasterName string
	// KeyPrefix defaults to DefaultClusterKeyPrefix.
	KeyPrefix string
	// Timeout bounds every call to Redis, from 1ms to 10s. Default
	// DefaultClusterTimeout.
	Timeout time.Duration
	// Replicas is how many proxies share the buckets, 1 to 10,000.
	// Default 1.
	Replicas int
}

// ClusterTLS is TLS to Redis (cluster.tls). Its zero value trusts the
// system's roots, presents no client certificate (CertFile and KeyFile,
// both or neither) and verifies the address's host.
type ClusterTLS struct {
	CAFile, CertFile, KeyFile, ServerName string
}

// ClusterTokenBucket is a point's token bucket shared by every proxy of
// the same Redis and point name, judged after the local strategies. The
// zero value is none.
type ClusterTokenBucket struct {
	// TokensPerSecond fills the shared bucket, 1 to 1e9.
	TokensPerSecond int64
	// Size is the most tokens the shared bucket holds, 1 to 1e12. Default
	// TokensPerSecond. The bucket starts full.
	Size int64
}

// On reports whether the point has a shared bucket.
func (b ClusterTokenBucket) On() bool { return b.TokensPerSecond > 0 }

// Defaults and limits of cluster: and clusterTokenBucket:.
const (
	DefaultClusterTimeout   = 50 * time.Millisecond
	DefaultClusterKeyPrefix = "sds:"
	maxClusterTimeout       = 10 * time.Second
	maxReplicas             = 10_000
	maxClusterAddresses     = 64
	maxClusterTokensPerSec  = 1_000_000_000
	maxClusterBucketSize    = 1_000_000_000_000
)

// cluster checks cluster: and every point's clusterTokenBucket.
func (c *checker) cluster() {
	f := c.d.f
	used := false
	for i := range f.Points {
		pt := &f.Points[i]
		b := &pt.ClusterTokenBucket
		base := pl(pt, keyClusterTokenBucket)
		if !c.d.has(base) {
			continue
		}
		used = true
		if f.Cluster == nil {
			c.p.add(c.key(base), "point %q: %s needs a top-level %s: with the Redis addresses the proxies share", pt.Name, base.field, keyCluster.name)
		}
		rate, size := pl(pt, keyClusterBucketTokensPerSecond), pl(pt, keyClusterBucketSize)
		if !c.d.has(rate) {
			c.p.add(c.key(base), "point %q: %s needs %s, such as %[3]s: 100", pt.Name, base.field, keyClusterBucketTokensPerSecond.name)
		}
		if !c.d.has(size) {
			b.Size = b.TokensPerSecond
		}
	}
	cl := f.Cluster
	if cl == nil {
		return
	}
	if !used {
		c.p.warn(c.key(top(keyCluster)), "%[1]s: no point has a %[2]s, so Redis is never called; add %[2]s: {%[3]s: N} to a point, or remove %[1]s:", keyCluster.path, keyClusterTokenBucket.name, keyClusterBucketTokensPerSecond.name)
	}
	if l := top(keyClusterAddresses); c.d.good(l) {
		switch {
		case len(cl.Addresses) == 0:
			c.p.add(c.key(top(keyCluster)), "%s: needs %s, such as %[2]s: [redis.default.svc:6379]", keyCluster.path, keyClusterAddresses.name)
		case len(cl.Addresses) > maxClusterAddresses:
			c.wrong(l, "%d addresses; at most %d", len(cl.Addresses), maxClusterAddresses)
		}
		for i, a := range cl.Addresses {
			if problem := redisAddress(a); problem != "" {
				c.p.add(c.val(l.item(i)), "%s: %q %s", l.field, a, problem)
			}
		}
	}
	if l := top(keyClusterDB); c.d.good(l) && cl.DB > 0 && len(cl.Addresses) > 1 && cl.MasterName == "" {
		c.wrong(l, "%d with several addresses (a Redis Cluster), which has only database 0", cl.DB)
	}
	if t := cl.TLS; t != nil && (t.CertFile == "") != (t.KeyFile == "") {
		c.p.add(c.key(top(keyClusterTLS)), "%s: %s and %s go together; give both for a client certificate, or neither", keyClusterTLS.path, keyClusterTLSCertFile.name, keyClusterTLSKeyFile.name)
	}
}

// redisAddress returns what is wrong with a Redis host:port, or "".
func redisAddress(a string) string {
	host, port, err := net.SplitHostPort(a)
	if err != nil || host == "" {
		return "is not a host:port address; write it as redis.default.svc:6379"
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "has no port from 1 to 65535"
	}
	if net.ParseIP(host) == nil && !validHostname(host) {
		return "has a host that is neither an IP address nor a host name"
	}
	return ""
}

// clusterString formats cluster: for a reload's explanation, without
// secrets (the password stays in its file).
func clusterString(c *Cluster) string {
	if c == nil {
		return "none"
	}
	parts := []string{
		keyClusterAddresses.name, fmt.Sprint(c.Addresses),
		keyClusterDB.name, strconv.Itoa(c.DB),
		keyClusterTimeout.name, c.Timeout.String(),
		keyClusterReplicas.name, strconv.Itoa(c.Replicas),
		keyClusterKeyPrefix.name, strconv.Quote(c.KeyPrefix),
	}
	for _, s := range []struct {
		key   *key
		value string
	}{{keyClusterMasterName, c.MasterName}, {keyClusterUsername, c.Username}, {keyClusterPasswordFile, c.PasswordFile}} {
		if s.value != "" {
			parts = append(parts, s.key.name, strconv.Quote(s.value))
		}
	}
	if c.TLS != nil {
		parts = append(parts, keyClusterTLS.name, fmt.Sprintf("%+v", *c.TLS))
	}
	return strings.Join(parts, " ")
}
