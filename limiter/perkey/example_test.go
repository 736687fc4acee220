package perkey_test

import (
	"fmt"
	"time"

	"github.com/sds-proxy/sds-proxy/limiter"
	"github.com/sds-proxy/sds-proxy/limiter/perkey"
)

func ExampleTable_Enter() {
	t, err := perkey.New(perkey.Settings{
		VisitThreshold:      limiter.At(2),
		ConcurrentThreshold: limiter.At(1),
		MaxKeys:             1000,
	})
	if err != nil {
		panic(err)
	}
	now := time.Unix(1_700_000_000, 0)
	const key = 0x1234 // the caller's seeded hash of the raw key

	var c perkey.Call
	v := t.Enter(&c, now, key)
	fmt.Println(v.Allowed)
	fmt.Println(t.Enter(nil, now, key).Strategy) // one call in flight already
	c.Exit()
	fmt.Println(t.Enter(&c, now, key).Allowed)
	c.Exit()
	v = t.Enter(&c, now, key)
	fmt.Println(v.Strategy, v.Count, v.Threshold)
	// Output:
	// true
	// key_concurrent
	// true
	// key_visit 3 2
}

func ExampleTable_Heaviest() {
	t, _ := perkey.New(perkey.Settings{MaxKeys: 1000})
	now := time.Unix(1_700_000_000, 0)
	for range 3 {
		t.Enter(nil, now, 0xa)
	}
	t.Enter(nil, now, 0xb)
	for _, k := range t.Heaviest(now, 10) {
		fmt.Printf("%x %d\n", k.Key, k.Visits)
	}
	// Output:
	// a 3
	// b 1
}
