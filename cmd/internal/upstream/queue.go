package upstream

import (
	"context"
	"sync"
	"time"
)

// Defaults of the queueing route /api/queue.
const (
	DefaultQueueCapacity = 10
	DefaultQueueService  = 50 * time.Millisecond
	// MaxQueueCapacity bounds the workers /_control may ask for.
	MaxQueueCapacity = 10000
)

// queue is a service of capacity workers that take service each per
// request, in arrival order: a request waits for the first worker to free
// up, so past capacity calls in flight its latency grows with the queue
// (about service * in flight / capacity). Its capacity can change while it
// serves. It is safe for concurrent use.
type queue struct {
	mu       sync.Mutex
	capacity int
	service  time.Duration
	busy     int
	waiting  []chan struct{} // closed when the request at its place gets a worker
}

// acquire waits for a worker, in arrival order, until ctx ends or done is
// closed; it returns the service time to spend, or the reason it stopped.
func (q *queue) acquire(ctx context.Context, done <-chan struct{}) (time.Duration, error) {
	q.mu.Lock()
	service := q.service
	if q.busy < q.capacity && len(q.waiting) == 0 {
		q.busy++
		q.mu.Unlock()
		return service, nil
	}
	ready := make(chan struct{})
	q.waiting = append(q.waiting, ready)
	q.mu.Unlock()
	var err error
	select {
	case <-ready:
		return service, nil
	case <-ctx.Done():
		err = ctx.Err()
	case <-done:
		err = errClosed
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	for i, ch := range q.waiting {
		if ch == ready {
			q.waiting = append(q.waiting[:i], q.waiting[i+1:]...)
			return 0, err
		}
	}
	// Granted as it gave up: hand the worker on.
	q.busy--
	q.grant()
	return 0, err
}

// release frees a worker.
func (q *queue) release() {
	q.mu.Lock()
	q.busy--
	q.grant()
	q.mu.Unlock()
}

// grant gives free workers to the first waiting requests. The caller
// holds q.mu.
func (q *queue) grant() {
	for q.busy < q.capacity && len(q.waiting) > 0 {
		close(q.waiting[0])
		q.waiting = q.waiting[1:]
		q.busy++
	}
}

// set changes the workers and the service time of the requests that get a
// worker from now on.
func (q *queue) set(capacity int, service time.Duration) {
	q.mu.Lock()
	q.capacity, q.service = capacity, service
	q.grant()
	q.mu.Unlock()
}

// QueueStats are /api/queue's settings and state, in Stats.
type QueueStats struct {
	// Capacity is the number of workers.
	Capacity int `json:"capacity"`
	// Service is each request's time at a worker, a Go duration string.
	Service string `json:"service"`
	// Busy and Waiting are the requests at a worker and in the queue now.
	Busy    int `json:"busy"`
	Waiting int `json:"waiting"`
}

// settings returns the workers and the service time.
func (q *queue) settings() (int, time.Duration) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.capacity, q.service
}

func (q *queue) stats() QueueStats {
	q.mu.Lock()
	defer q.mu.Unlock()
	return QueueStats{Capacity: q.capacity, Service: q.service.String(), Busy: q.busy, Waiting: len(q.waiting)}
}

// serveQueue serves /api/queue: wait for a worker, spend the service time
// there, answer 200.
func (h *Handler) serveQueue(ctx context.Context) (time.Duration, error) {
	service, err := h.queue.acquire(ctx, h.done)
	if err != nil {
		return 0, err
	}
	defer h.queue.release()
	return service, h.wait(ctx, service)
}
