package config

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"time"

	"gopkg.in/yaml.v3"
)

// Cluster is the Redis that the points' shared token buckets live in
// (README, "Fleet-wide budgets"): top-level cluster:. Changing it needs a
// restart; the points' clusterTokenBucket settings apply on a reload.
type Cluster struct {
	// Addresses are host:port addresses: one Redis, several nodes of a
	// Redis Cluster, or the sentinels when MasterName is set. At least one.
	Addresses []string
	// Username is the ACL user; "" for the default user.
	Username string
	// PasswordFile is the file holding the password, absolute after Parse
	// (a relative path is resolved against the config file's directory);
	// "" for none. The proxy reads it for every new connection, so a
	// rotated Secret applies without a restart; the config holds no
	// password. It is the Redis servers' password, not the sentinels'.
	PasswordFile string
	// TLS, when not nil, speaks TLS to Redis.
	TLS *ClusterTLS
	// DB is the database number, 0 or more; a Redis Cluster has only 0.
	DB int
	// MasterName names the Sentinel master set; "" for none.
	MasterName string
	// KeyPrefix starts every key the proxies write. Default
	// DefaultClusterKeyPrefix.
	KeyPrefix string
	// Timeout bounds every call to Redis, from 1ms to
	// maxClusterTimeout. Default DefaultClusterTimeout. No request ever
	// waits on Redis: calls are made in the background.
	Timeout time.Duration
	// Replicas is how many proxies share the buckets, 1 to maxReplicas:
	// while Redis fails, each counts on tokensPerSecond ÷ Replicas.
	// Default 1.
	Replicas int
}

// ClusterTLS is TLS to Redis. Its zero value trusts the system's roots and
// presents no client certificate.
type ClusterTLS struct {
	// CAFile is a PEM file of the roots to trust; "" for the system's.
	CAFile string
	// CertFile and KeyFile are a PEM client certificate and key, both or
	// neither.
	CertFile, KeyFile string
	// ServerName is the name to verify the server's certificate against;
	// "" for the address's host.
	ServerName string
}

// ClusterTokenBucket is a point's token bucket shared by every proxy of
// the same Redis and point name, judged after the local strategies. The
// zero value is none.
type ClusterTokenBucket struct {
	// TokensPerSecond fills the shared bucket, 1 to
	// maxClusterTokensPerSecond.
	TokensPerSecond int64
	// Size is the most tokens the shared bucket holds, 1 to
	// maxClusterBucketSize. Default TokensPerSecond. The bucket starts
	// full.
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

// cluster decodes the cluster mapping into f.Cluster, defaults first.
func (d *decoder) cluster(n *yaml.Node) {
	c := &Cluster{KeyPrefix: DefaultClusterKeyPrefix, Timeout: DefaultClusterTimeout, Replicas: 1}
	d.out.f.Cluster = c
	d.fields(n, "in cluster", loc{field: "cluster."}, clusterSection, map[string]setter{
		"addresses":    d.strings(loc{field: "cluster.addresses"}, &c.Addresses),
		"username":     d.str(&c.Username),
		"passwordFile": d.str(&c.PasswordFile),
		"tls": func(_ string, v *yaml.Node) {
			c.TLS = &ClusterTLS{}
			d.fields(v, "in cluster.tls", loc{field: "cluster.tls."}, clusterTLSSection, map[string]setter{
				"caFile":     d.str(&c.TLS.CAFile),
				"certFile":   d.str(&c.TLS.CertFile),
				"keyFile":    d.str(&c.TLS.KeyFile),
				"serverName": d.str(&c.TLS.ServerName),
			})
		},
		"db":         integer(d, &c.DB),
		"masterName": d.str(&c.MasterName),
		"keyPrefix":  d.str(&c.KeyPrefix),
		"timeout":    d.duration(&c.Timeout),
		"replicas":   integer(d, &c.Replicas),
	})
}

// clusterBucket decodes a point's clusterTokenBucket into b.
func (d *decoder) clusterBucket(n *yaml.Node, point string, b *ClusterTokenBucket) {
	d.fields(n, fmt.Sprintf("in the clusterTokenBucket of point %q", point), loc{point: point, field: "clusterTokenBucket."}, clusterBucketSection, map[string]setter{
		"tokensPerSecond": integer(d, &b.TokensPerSecond),
		"size":            integer(d, &b.Size),
	})
}

// cluster checks cluster: and every point's clusterTokenBucket.
func (c *checker) cluster() {
	f := c.d.f
	used := false
	for i := range f.Points {
		pt := &f.Points[i]
		b := &pt.ClusterTokenBucket
		base := loc{point: pt.Name, field: "clusterTokenBucket"}
		if !c.d.has(base) {
			continue
		}
		used = true
		if f.Cluster == nil {
			c.p.add(c.key(base), "point %q: clusterTokenBucket needs a top-level cluster: with the Redis addresses the proxies share", pt.Name)
		}
		rate := loc{point: pt.Name, field: "clusterTokenBucket.tokensPerSecond"}
		size := loc{point: pt.Name, field: "clusterTokenBucket.size"}
		switch {
		case !c.d.has(rate):
			c.p.add(c.key(base), "point %q: clusterTokenBucket needs tokensPerSecond, such as tokensPerSecond: 100", pt.Name)
		case c.d.good(rate) && (b.TokensPerSecond < 1 || b.TokensPerSecond > maxClusterTokensPerSec):
			c.p.add(c.val(rate), "clusterTokenBucket.tokensPerSecond: %d is not from 1 to %d", b.TokensPerSecond, maxClusterTokensPerSec)
		}
		if !c.d.has(size) {
			b.Size = b.TokensPerSecond
		} else if c.d.good(size) && (b.Size < 1 || b.Size > maxClusterBucketSize) {
			c.p.add(c.val(size), "clusterTokenBucket.size: %d is not from 1 to %d tokens", b.Size, maxClusterBucketSize)
		}
	}
	cl := f.Cluster
	if cl == nil {
		return
	}
	if !used {
		c.p.warn(c.key(top("cluster")), "cluster: no point has a clusterTokenBucket, so Redis is never called; add clusterTokenBucket: {tokensPerSecond: N} to a point, or remove cluster:")
	}
	at := func(field string) loc { return top("cluster." + field) }
	if c.d.good(at("addresses")) {
		switch {
		case len(cl.Addresses) == 0:
			c.p.add(c.key(top("cluster")), "cluster: needs addresses, such as addresses: [redis.default.svc:6379]")
		case len(cl.Addresses) > maxClusterAddresses:
			c.p.add(c.val(at("addresses")), "cluster.addresses: %d addresses; at most %d", len(cl.Addresses), maxClusterAddresses)
		}
		for i, a := range cl.Addresses {
			if problem := redisAddress(a); problem != "" {
				c.p.add(c.val(loc{field: fmt.Sprintf("cluster.addresses[%d]", i)}), "cluster.addresses: %q %s", a, problem)
			}
		}
	}
	if c.d.good(at("db")) {
		switch {
		case cl.DB < 0:
			c.p.add(c.val(at("db")), "cluster.db: %d is negative; Redis numbers its databases from 0", cl.DB)
		case cl.DB != 0 && len(cl.Addresses) > 1 && cl.MasterName == "":
			c.p.add(c.val(at("db")), "cluster.db: %d with several addresses (a Redis Cluster), which has only database 0", cl.DB)
		}
	}
	if c.d.has(at("masterName")) && c.d.good(at("masterName")) && cl.MasterName == "" {
		c.p.add(c.val(at("masterName")), "cluster.masterName is empty; give the Sentinel master set's name, or remove the key")
	}
	if c.d.good(at("timeout")) && (cl.Timeout < time.Millisecond || cl.Timeout > maxClusterTimeout) {
		c.p.add(c.val(at("timeout")), "cluster.timeout: %v is not from 1ms to %v; it bounds each background call to Redis (default %v)", cl.Timeout, maxClusterTimeout, DefaultClusterTimeout)
	}
	if c.d.good(at("replicas")) && (cl.Replicas < 1 || cl.Replicas > maxReplicas) {
		c.p.add(c.val(at("replicas")), "cluster.replicas: %d is not from 1 to %d; give the number of proxies sharing the buckets", cl.Replicas, maxReplicas)
	}
	if t := cl.TLS; t != nil && (t.CertFile == "") != (t.KeyFile == "") {
		c.p.add(c.key(top("cluster.tls")), "cluster.tls: certFile and keyFile go together; give both for a client certificate, or neither")
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

// readClusterFiles resolves cluster:'s files against dir (the config
// file's directory) and checks that they exist; the password is not read
// into the config. A missing passwordFile is a warning, not an error: the
// proxy reads it for each connection (a Secret may appear later, and a
// config is often validated away from the pod that mounts it), and until it
// is there Redis refuses the proxy, whose points count on their shares. The
// TLS files are read once at start-up: a missing one is an error.
func readClusterFiles(d *decoded, dir string, p *problems) {
	cl := d.f.Cluster
	if cl == nil {
		return
	}
	files := []struct {
		field string
		path  *string
	}{{"cluster.passwordFile", &cl.PasswordFile}}
	if t := cl.TLS; t != nil {
		files = append(files, struct {
			field string
			path  *string
		}{"cluster.tls.caFile", &t.CAFile}, struct {
			field string
			path  *string
		}{"cluster.tls.certFile", &t.CertFile}, struct {
			field string
			path  *string
		}{"cluster.tls.keyFile", &t.KeyFile})
	}
	for _, f := range files {
		if *f.path == "" {
			if d.has(loc{field: f.field}) && !d.bad[loc{field: f.field}] {
				p.add(d.at[loc{field: f.field}].val, "%s is empty; give a file's path, or remove the key", f.field)
			}
			continue
		}
		name := inDir(dir, *f.path)
		*f.path = resolve(dir, *f.path)
		info, err := os.Stat(name)
		switch {
		case err != nil && f.field == "cluster.passwordFile":
			p.warn(d.at[loc{field: f.field}].val, "%s: %s; until it is there Redis refuses this proxy and each point counts on its share", f.field, fileProblem(name, err))
		case err != nil:
			p.add(d.at[loc{field: f.field}].val, "%s: %s", f.field, fileProblem(name, err))
		case !info.Mode().IsRegular():
			p.add(d.at[loc{field: f.field}].val, "%s: %s is not a regular file", f.field, name)
		}
	}
}

// clusterFigure formats a clusterTokenBucket figure; 0 is off.
func clusterFigure(n int64) string {
	if n <= 0 {
		return "off"
	}
	return strconv.FormatInt(n, 10)
}

// clusterString formats cluster: for a reload's explanation, without
// secrets (the password stays in its file).
func clusterString(c *Cluster) string {
	if c == nil {
		return "none"
	}
	s := fmt.Sprintf("addresses %v db %d timeout %v replicas %d keyPrefix %q", c.Addresses, c.DB, c.Timeout, c.Replicas, c.KeyPrefix)
	if c.MasterName != "" {
		s += " masterName " + strconv.Quote(c.MasterName)
	}
	if c.Username != "" {
		s += " username " + strconv.Quote(c.Username)
	}
	if c.PasswordFile != "" {
		s += " passwordFile " + strconv.Quote(c.PasswordFile)
	}
	if c.TLS != nil {
		s += fmt.Sprintf(" tls %+v", *c.TLS)
	}
	return s
}
