package stale

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// user is a simulated client: its own cookie and/or bearer token (none
// for the anonymous one) and an X-User header.
type user struct {
	id            int
	cookie, token string // "" for none
}

func (u user) credentialed() bool { return u.cookie != "" || u.token != "" }

func (u user) request() Request {
	req := get("/account", "X-User", "u"+strconv.Itoa(u.id))
	if u.cookie != "" {
		req.Header.Set("Cookie", u.cookie)
	}
	if u.token != "" {
		req.Header.Set("Authorization", u.token)
	}
	return req
}

// value is what u sends for a header a Vary may name; "-" for none.
func (u user) value(name string) string {
	switch name {
	case "Cookie":
		if u.cookie != "" {
			return u.cookie
		}
	case "Authorization":
		if u.token != "" {
			return u.token
		}
	case "X-User":
		return "u" + strconv.Itoa(u.id)
	case "":
		return ""
	}
	return "-"
}

// produced is an answer the upstream gave, as the model knows it.
type produced struct {
	serial     int
	by         user
	directives []string
	vary       string // "" for none
	setCookie  bool
	arrived    time.Time
}

func (p produced) has(d string) bool { return slices.Contains(p.directives, d) }
func (p produced) shareable() bool   { return p.has("public") || p.has("s-maxage=60") }
func (p produced) slot() [2]string   { return [2]string{p.vary, p.by.value(p.vary)} }
func (p produced) servable(age time.Duration) bool {
	return age < 10*time.Minute && (!p.has("s-maxage=60") || age < time.Minute)
}

// kept is the model's rule of what may be kept, written from the issue's
// words rather than from the code.
func (p produced) kept() bool {
	switch {
	case p.setCookie, p.has("no-store"), p.has("private"), p.has("no-cache"):
		return false
	case p.by.token != "" && !p.shareable():
		return false
	case p.by.cookie != "" && !p.shareable() && p.vary != "Cookie":
		return false
	}
	return true
}

// TestNeverSomeoneElses is the differential test of the title.
// Users with their own cookies and tokens ask for the same URL; the
// upstream answers with random Cache-Control, Vary and Set-Cookie;
// recordings start, stream and end interleaved with lookups. Every
// lookup must return exactly what a model of the rules says (the last
// arrived kept answer the user matches), and whatever it returns must be
// the user's own, an anonymous request's, or one the upstream marked
// shareable without varying on a credential the user differs on.
func TestNeverSomeoneElses(t *testing.T) {
	for seed := range uint64(300) {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) { neverSomeoneElses(t, seed) })
	}
}

func neverSomeoneElses(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 22))
	users := []user{{id: 0}}
	for i := 1; i < 6; i++ {
		u := user{id: i}
		switch rng.IntN(3) {
		case 0:
			u.cookie = "sid=s" + strconv.Itoa(i)
		case 1:
			u.token = "Bearer t" + strconv.Itoa(i)
		default:
			u.cookie, u.token = "sid=s"+strconv.Itoa(i), "Bearer t"+strconv.Itoa(i)
		}
		users = append(users, u)
	}
	c := New(64 << 20)
	type open struct {
		r    *Recorder
		p    produced
		body string
		sent int
	}
	var opens []*open
	all := map[int]produced{}
	slots := map[[2]string]produced{} // the model: kept answers by Vary slot
	now := t0
	serial := 0
	for step := range 400 {
		now = now.Add(time.Millisecond + time.Duration(rng.IntN(2000))*time.Millisecond)
		if rng.IntN(100) == 0 {
			now = now.Add(5 * time.Minute)
		}
		switch op := rng.IntN(10); {
		case op < 3: // a call: its answer's header arrives
			serial++
			p := produced{serial: serial, by: users[rng.IntN(len(users))], arrived: now}
			for _, d := range []string{"public", "private", "no-store", "max-age=60", "s-maxage=60", "no-cache"} {
				if rng.IntN(4) == 0 {
					p.directives = append(p.directives, d)
				}
			}
			p.vary = []string{"", "Cookie", "Authorization", "X-User"}[rng.IntN(4)]
			p.setCookie = rng.IntN(5) == 0
			resp := answer(200)
			if len(p.directives) > 0 {
				resp.Header.Set("Cache-Control", strings.Join(p.directives, ", "))
			}
			if p.vary != "" {
				resp.Header.Set("Vary", p.vary)
			}
			if p.setCookie {
				resp.Header.Set("Set-Cookie", "sid=new")
			}
			all[serial] = p
			r := c.Record(p.by.request(), resp, now)
			if (r != nil) != p.kept() {
				t.Fatalf("step %d: answer %v: got a recorder %v, want %v", step, p, r != nil, p.kept())
			}
			opens = append(opens, &open{r: r, p: p, body: fmt.Sprintf("serial=%d;user=%d", serial, p.by.id)})
		case op < 5 && len(opens) > 0: // some of a body is relayed
			o := opens[rng.IntN(len(opens))]
			n := o.sent + rng.IntN(len(o.body)-o.sent+1)
			_, _ = o.r.Write([]byte(o.body[o.sent:n]))
			o.sent = n
		case op < 7 && len(opens) > 0: // a body ends
			i := rng.IntN(len(opens))
			o := opens[i]
			opens = slices.Delete(opens, i, i+1)
			_, _ = o.r.Write([]byte(o.body[o.sent:]))
			o.r.Done(true, now)
			// An answer only served while fresh is not kept if its body
			// ends after its freshness.
			if o.p.kept() && (!o.p.has("s-maxage=60") || now.Sub(o.p.arrived) < time.Minute) {
				if old, ok := slots[o.p.slot()]; !ok || !old.arrived.After(o.p.arrived) {
					slots[o.p.slot()] = o.p
				}
			}
		default: // a degraded request of a user
			u := users[rng.IntN(len(users))]
			var want *produced
			for _, p := range slots {
				if u.value(p.vary) != p.by.value(p.vary) || !p.servable(now.Sub(p.arrived)) {
					continue
				}
				if want == nil || p.arrived.After(want.arrived) {
					want = &p
				}
			}
			a, ok := c.Lookup(u.request(), 10*time.Minute, now)
			if !ok {
				if want != nil {
					t.Fatalf("step %d: user %d got no answer, want serial %d", step, u.id, want.serial)
				}
				continue
			}
			w := httptest.NewRecorder()
			a.Serve(w, false, "shed; point=p; stale", now)
			var got, by int
			if _, err := fmt.Sscanf(w.Body.String(), "serial=%d;user=%d", &got, &by); err != nil {
				t.Fatalf("step %d: body %q: %v", step, w.Body, err)
			}
			p := all[got]
			if p.by.credentialed() && p.by.id != u.id {
				if !p.shareable() {
					t.Fatalf("step %d: user %d got user %d's private answer %v", step, u.id, p.by.id, p)
				}
				if (p.vary == "Cookie" || p.vary == "Authorization") && u.value(p.vary) != p.by.value(p.vary) {
					t.Fatalf("step %d: user %d got user %d's answer varying on %s", step, u.id, p.by.id, p.vary)
				}
			}
			if want == nil || got != want.serial {
				t.Fatalf("step %d: user %d got serial %d, want %v", step, u.id, got, want)
			}
			if w.Header().Get("Set-Cookie") != "" || w.Code != http.StatusOK {
				t.Fatalf("step %d: served status %d Set-Cookie %q", step, w.Code, w.Header().Get("Set-Cookie"))
			}
		}
	}
	check(t, c)
}
