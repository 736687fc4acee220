package h1test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"
)

// Tally is what the clients of one Drive got.
type Tally struct {
	Checked     int      // answers whose status and body were read
	Wrong       []string // answers that named another request's path, each as "own got what"
	CleanFailed int      // correct requests (not faulty) that did not get their own answer
}

func (tl Tally) String() string {
	return fmt.Sprintf("%d wrong of %d checked, %d correct requests failed", len(tl.Wrong), tl.Checked, tl.CleanFailed)
}

// Drive sends clients × perClient requests for base+prefix+"/cC/N" (each
// client C its own keep-alive connection, N its request number), with
// query (may be empty) on each, every third one faulty (FaultyQuery=1, with
// f's Method), and counts what came back. base is "http://host:port". A
// client reads a stalling answer's marker and then gives up on it. Drive
// returns when every request has ended.
func Drive(base, prefix, query string, f Fault, clients, perClient int) Tally {
	var (
		mu sync.Mutex
		tl Tally
		wg sync.WaitGroup
	)
	add := func(wrong string, cleanFailed bool) {
		mu.Lock()
		defer mu.Unlock()
		tl.Checked++
		if wrong != "" {
			tl.Wrong = append(tl.Wrong, wrong)
		}
		if cleanFailed {
			tl.CleanFailed++
		}
	}
	for ci := range clients {
		wg.Go(func() {
			tr := &http.Transport{MaxIdleConnsPerHost: 1, DisableCompression: true}
			defer tr.CloseIdleConnections()
			client := &http.Client{Transport: tr, Timeout: 30 * time.Second} // a hang fails the request, not the test binary
			for n := range perClient {
				own := fmt.Sprintf("%s/c%d/%d", prefix, ci, n)
				faulty := n%3 == 0
				method, target := http.MethodGet, base+own+"?"+query
				if faulty {
					target += "&" + FaultyQuery + "=1"
					if f.Method != "" {
						method = f.Method
					}
				}
				wrong, ok := get(client, method, target, own, faulty && f.Stalls)
				add(wrong, !faulty && !ok)
			}
		})
	}
	wg.Wait()
	return tl
}

// get sends one request and says what in its answer names a path other
// than own, and whether it was own's correct answer.
func get(client *http.Client, method, target, own string, stalls bool) (wrong string, ok bool) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, target, nil)
	if err != nil {
		return "", false
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", false
	}
	defer resp.Body.Close()
	var body []byte
	if stalls {
		body = make([]byte, len("@"+own))
		_, err = io.ReadFull(resp.Body, body)
	} else {
		body, err = io.ReadAll(resp.Body)
	}
	if w := Misdirected(resp, body, own); w != "" {
		wrong = own + " got " + w
	}
	return wrong, err == nil && resp.StatusCode == http.StatusOK && string(body) == "@"+own
}
