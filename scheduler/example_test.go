package scheduler_test

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/edictrt/edict/priority"
	"github.com/edictrt/edict/scheduler"
)

// oneTask is a Claimer that hands out a single task.
type oneTask struct {
	mu   sync.Mutex
	task *scheduler.Task
}

func (c *oneTask) ClaimTask(ctx context.Context, f scheduler.ClaimFilter) (*scheduler.Task, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.task
	c.task = nil
	return t, nil
}
func (c *oneTask) Pending(context.Context) (map[string]int, error) { return nil, nil }
func (c *oneTask) Defer(context.Context, *scheduler.Task, time.Duration, string) error {
	return nil
}
func (c *oneTask) Extend(context.Context, *scheduler.Task) error { return nil }
func (c *oneTask) Settle(_ context.Context, t *scheduler.Task, result error) error {
	fmt.Printf("settled %s: %v\n", t.ID, result)
	return nil
}

func ExamplePool() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	claimer := &oneTask{task: &scheduler.Task{ID: "t1", Type: "conversation", Class: priority.Interactive}}
	pool, err := scheduler.NewPool(scheduler.PoolConfig{
		Workers: 2,
		Claimer: claimer,
		Policy:  scheduler.NewPolicy(scheduler.PolicyConfig{Workers: 2, Reserved: 1, PerLaneMin: 1}, nil),
		Handler: func(ctx context.Context, t *scheduler.Task) error {
			fmt.Printf("running %s as %s\n", t.ID, priority.From(ctx))
			cancel() // stop the pool after this task
			return nil
		},
	})
	if err != nil {
		panic(err)
	}
	if err := pool.Run(ctx); err != nil {
		panic(err)
	}
	// Output:
	// running t1 as interactive
	// settled t1: <nil>
}

func ExamplePolicy_Decide() {
	reg := scheduler.NewRegistry()
	policy := scheduler.NewPolicy(scheduler.PolicyConfig{Workers: 4, Reserved: 2, PerLaneMin: 1}, reg)
	reg.Start("w0", "research", "background_research")
	reg.Start("w1", "connectors", "feed_sweep")
	fmt.Println(policy.InteractiveFloor())
	fmt.Println(policy.Decide("ingestion", "document", nil))
	fmt.Println(policy.Decide("queries", "conversation", nil))
	// Output:
	// 2
	// {false reserve interactive (2)}
	// {true admitted}
}

func ExampleThrottle() {
	th := scheduler.NewThrottle(scheduler.ThrottleConfig{})
	done := th.Foreground(context.Background())
	fmt.Println("foreground:", th.Active())
	done()
	fmt.Println("after done:", th.Active())
	// Background loops call Checkpoint between units of work.
	fmt.Println(th.Checkpoint(context.Background()))
	// Output:
	// foreground: true
	// after done: false
	// <nil>
}
