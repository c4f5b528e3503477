package retry_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/packbot/packbot/internal/retry"
)

func ExamplePolicy_Do() {
	errBusy := errors.New("database busy")
	calls := 0
	p := retry.Policy{First: time.Millisecond, Max: 10 * time.Millisecond, Within: time.Second,
		Retryable: func(err error) bool { return errors.Is(err, errBusy) }}
	err := p.Do(context.Background(), func(context.Context) error {
		if calls++; calls < 3 {
			return errBusy
		}
		return nil
	})
	fmt.Println(calls, err)
	// Output: 3 <nil>
}
