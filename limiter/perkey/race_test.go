//go:build race

package perkey

// churnSteps is how many churning keys the churn tests send: fewer under
// the race detector, which makes each step about ten times slower, so that
// the test suite's timing-sensitive end-to-end tests, run beside it, are
// not starved of CPU. The properties checked are the same.
const churnSteps = 60_000
