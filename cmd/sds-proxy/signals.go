package main

import (
	"os"
	"os/signal"
	"sync"
	"syscall"

	"go.uber.org/zap"

	"github.com/sds-proxy/sds-proxy/cmd/sds-proxy/internal/hangup"
)

// signals handles the process's signals for runProxy, from its first line
// to its return: until a handler is installed, SIGHUP's default action
// kills the process, so nothing may come before notifySignals. SIGHUP's
// handler is installed earlier still, by package hangup's init, before
// most packages are initialised; notifySignals takes it over.
//
// SIGTERM and SIGINT stop the proxy (the drain follows). SIGHUP depends on
// the stage: during start-up it is a no-op, as the watcher reads the file
// once when it starts; while serving it reloads the config, or is a
// logged no-op when there is no config file; during the drain it is
// ignored, logged. Each kind has a buffer of one: signals that arrive
// while one of the same kind waits are merged into it.
type signals struct {
	term, hup chan os.Signal
	done      chan struct{}
	wg        sync.WaitGroup

	mu     sync.Mutex
	stage  stage
	reload func() // set while serving with a config file; nil otherwise
}

// stage is how far runProxy has come.
type stage uint8

const (
	stageStarting stage = iota + 1
	stageServing
	stageDraining
)

// notifySignals starts receiving SIGTERM, SIGINT and SIGHUP; they wait in
// their buffers until handle. SIGHUP comes on package hangup's channel,
// which has received it since the process started (or, where that has
// been taken, on a channel of its own).
func notifySignals() *signals {
	s := &signals{term: make(chan os.Signal, 1), hup: hangup.Take(), done: make(chan struct{}), stage: stageStarting}
	signal.Notify(s.term, syscall.SIGTERM, syscall.SIGINT)
	if s.hup == nil {
		s.hup = make(chan os.Signal, 1)
		signal.Notify(s.hup, syscall.SIGHUP)
	}
	return s
}

// handle acts on signals until close: stop is called on SIGTERM or SIGINT.
func (s *signals) handle(log *zap.Logger, stop func()) {
	s.wg.Go(func() {
		for {
			select {
			case <-s.done:
				return
			case sig := <-s.term:
				log.Info("signal: stopping", zap.String("signal", sig.String()))
				stop()
			case <-s.hup:
				s.mu.Lock()
				st, reload := s.stage, s.reload
				s.mu.Unlock()
				switch {
				case st == stageStarting:
					log.Info("SIGHUP during start-up: the config file is read as the watch starts")
				case st == stageDraining:
					log.Warn("SIGHUP while draining: ignored")
				case reload == nil:
					log.Info("SIGHUP: no config file to reload; ignored")
				default:
					log.Info("SIGHUP: reloading the config")
					reload()
				}
			}
		}
	})
}

// serving marks the proxy as serving; reload is what SIGHUP calls from
// now on (nil: there is no config file to reload).
func (s *signals) serving(reload func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stage, s.reload = stageServing, reload
}

// draining marks the drain: SIGHUP is ignored from now on.
func (s *signals) draining() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stage = stageDraining
}

// close stops handling signals. SIGHUP stays ignored until the process
// exits, which follows: restoring its default action would let a late
// SIGHUP kill a process that is shutting down cleanly.
func (s *signals) close() {
	close(s.done)
	s.wg.Wait()
	signal.Ignore(syscall.SIGHUP)
	signal.Stop(s.term)
}
