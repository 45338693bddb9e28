package observe

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// redisLog takes the lines the Redis client writes (its dial failures,
// what Sentinel tells it) into the process log, as records with
// component "redis": a Sentinel's new master at info, the rest at debug,
// since the session store logs an outage itself, once. Until a serving
// Server sets a logger the lines are dropped, so that no raw line reaches
// stderr (gmgate config check, tests).
type redisLog struct{ Log atomic.Pointer[slog.Logger] }

var RedisLines = &redisLog{}

func init() { redis.SetLogger(RedisLines) }

func (l *redisLog) Printf(ctx context.Context, format string, v ...any) {
	log := l.Log.Load()
	if log == nil {
		return
	}
	msg := strings.TrimSpace(fmt.Sprintf(format, v...))
	level := slog.LevelDebug
	if strings.Contains(msg, "sentinel: new master") {
		level = slog.LevelInfo
	}
	if ctx == nil {
		ctx = context.Background()
	}
	log.Log(ctx, level, msg, "component", "redis")
}
