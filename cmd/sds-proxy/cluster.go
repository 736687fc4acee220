package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/sds-proxy/sds-proxy/config"
	"github.com/sds-proxy/sds-proxy/limiter"
	"github.com/sds-proxy/sds-proxy/proxy/cluster"
)

// quietRedis turns go-redis's own logger off, for the whole process. That
// logger is a global of the go-redis package (v9 has no logger per
// client), so the program sets it, once, as main starts, and no library
// does. Left on, it writes a line to stderr for every failed dial, several
// a second while Redis is down; cluster.Client logs each change of state
// once instead, through the zap logger it is given, and counts every
// failure in sds_cluster_errors_total.
func quietRedis() { redis.SetLogger(discardRedis{}) }

// discardRedis is a go-redis logger that writes nothing.
type discardRedis struct{}

func (discardRedis) Printf(context.Context, string, ...any) {}

// newClusterClient returns the client of cluster: (docs/fleet.md, "Fleet-wide
// budgets"), or nil when the file has none. It does not connect: its Run
// does, in the background.
func newClusterClient(c *config.Cluster, log *zap.Logger, reg prometheus.Registerer) (*cluster.Client, error) {
	if c == nil {
		return nil, nil
	}
	tlsConfig, err := clusterTLS(c.TLS)
	if err != nil {
		return nil, err
	}
	return cluster.New(cluster.Options{
		Addresses:    c.Addresses,
		Username:     c.Username,
		PasswordFile: c.PasswordFile,
		TLS:          tlsConfig,
		DB:           c.DB,
		MasterName:   c.MasterName,
		KeyPrefix:    c.KeyPrefix,
		Timeout:      c.Timeout,
		Replicas:     c.Replicas,
		Logger:       log.Named("cluster"),
		Registerer:   reg,
	})
}

// clusterTLS returns the TLS config of cluster.tls, or nil for plain TCP.
func clusterTLS(t *config.ClusterTLS) (*tls.Config, error) {
	if t == nil {
		return nil, nil
	}
	c := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.ServerName}
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("cluster.tls.caFile: %w", err)
		}
		c.RootCAs = x509.NewCertPool()
		if !c.RootCAs.AppendCertsFromPEM(pem) {
			return nil, errors.New("cluster.tls.caFile: " + t.CAFile + " holds no PEM certificate")
		}
	}
	if t.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("cluster.tls: %w", err)
		}
		c.Certificates = []tls.Certificate{cert}
	}
	return c, nil
}

// sharedBuckets returns the shared bucket of each point of f that has one,
// by name for translateShared and as a list for cluster.Client.Use; a
// bucket whose point, rate and size are unchanged is the one in use, its
// lease kept. Both are nil without a client.
func sharedBuckets(cl *cluster.Client, f *config.File) (map[string]limiter.Gate, []*cluster.Bucket) {
	if cl == nil {
		return nil, nil
	}
	byName := make(map[string]limiter.Gate)
	var list []*cluster.Bucket
	for _, p := range f.Points {
		if b := p.ClusterTokenBucket; b.On() {
			bucket := cl.Bucket(p.Name, b.TokensPerSecond, b.Size)
			byName[p.Name] = bucket
			list = append(list, bucket)
		}
	}
	return byName, list
}

// clusterStatus is the admin port's view of the shared buckets; nil
// without cluster:.
func (in *instance) clusterStatus() func(time.Time) cluster.Status {
	if in.cluster == nil {
		return nil
	}
	return in.cluster.Status
}
