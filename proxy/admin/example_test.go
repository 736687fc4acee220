package admin_test

import (
	"encoding/json"
	"fmt"

	"github.com/sds-proxy/sds-proxy/proxy/admin"
)

// ExampleStatus reads a /status document, as `sds-proxy status` does:
// what a field omits is its zero value (Reason nil: nothing would trip),
// and fields the reader does not know are ignored.
func ExampleStatus() {
	body := `{"now":"2026-12-01T04:30:00Z","config":{"path":"sds.yaml","hash":"00ff"},"events":[],
	  "points":[{"name":"orders.read","mode":"enforce","state":"closed","newer":true,
	    "strategies":[{"strategy":"visit","count":3,"threshold":1000,"trips":false}],
	    "window":{"visits":3,"degraded":0,"exceptions":0,"timeouts":0,"inFlight":1}}]}`
	var doc admin.Status
	if err := json.Unmarshal([]byte(body), &doc); err != nil {
		fmt.Println(err)
		return
	}
	for _, p := range doc.Points {
		fmt.Println(p.Name, p.State, p.Reason == nil, p.Window.Visits, p.Window.InFlight)
		for _, s := range p.Strategies {
			fmt.Printf("  %s %d/%d trips=%v\n", s.Strategy, s.Count, s.Threshold, s.Trips)
		}
	}
	// Output:
	// orders.read closed true 3 1
	//   visit 3/1000 trips=false
}
