// Command sharedstore is a timed-task service over a shared document
// store, guarded by a 15-second chronoq lock per document: a producer
// enqueues tasks due at given times (RunAt), and several worker processes
// ("nodes") claim and run them. Each task appends a line to its document
// under the document's lock, passing the lock's fencing token to the
// store, which refuses a token below the largest it has seen.
//
//	sharedstore produce -url http://127.0.0.1:7070 -n 300
//	sharedstore work -url http://127.0.0.1:7070 -store ./store -node a   # on each node
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"chronoq"
)

// LockLease is the lease of a document's lock.
const LockLease = 15 * time.Second

// Job is a task's payload.
type Job struct {
	// Doc is the document the task writes.
	Doc int `json:"doc"`
	// Seq is the task's number.
	Seq int `json:"seq"`
}

// Store is the shared document store: one file per document, each line
// "<task id> <node> <fencing token>".
type Store struct {
	// Dir is the store's directory.
	Dir string
}

// Append adds a line to doc unless token is below the largest token the
// document has seen (a holder whose lock lapsed).
func (s Store) Append(doc int, taskID, node string, token uint64) error {
	path := filepath.Join(s.Dir, fmt.Sprintf("doc-%d.log", doc))
	data, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if last := lines[len(lines)-1]; last != "" {
		fields := strings.Fields(last)
		seen, _ := strconv.ParseUint(fields[len(fields)-1], 10, 64)
		if token < seen {
			return fmt.Errorf("doc %d: fencing token %d is below %d", doc, token, seen)
		}
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintf(f, "%s %s %d\n", taskID, node, token); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// Produce enqueues n tasks on queue, due over the spread from start (task
// i at start + spread*i/n), spread over docs documents.
func Produce(ctx context.Context, c *chronoq.Client, queue string, n, docs int, start time.Time, spread time.Duration) error {
	specs := make([]chronoq.TaskSpec, n)
	for i := range specs {
		specs[i] = chronoq.TaskSpec{
			Queue:   queue,
			ID:      fmt.Sprintf("%s-task-%d", queue, i),
			Payload: Job{Doc: i % docs, Seq: i},
			RunAt:   start.Add(spread * time.Duration(i) / time.Duration(n)),
		}
	}
	_, err := c.EnqueueMany(ctx, specs)
	return err
}

// Work runs a worker node on queue until ctx is done.
func Work(ctx context.Context, c *chronoq.Client, queue string, store Store, node string, concurrency int) error {
	w := chronoq.NewWorker(c, chronoq.WorkerOptions{Concurrency: concurrency, Wait: time.Second})
	w.Handle(queue, func(ctx context.Context, l *chronoq.Lease) error {
		var job Job
		if err := l.Decode(&job); err != nil {
			return err
		}
		lk, err := c.LockOwned(ctx, fmt.Sprintf("doc:%d", job.Doc), 30*time.Second, LockLease, node)
		if err != nil {
			return err
		}
		err = store.Append(job.Doc, l.ID, node, lk.Token())
		if rerr := lk.Release(context.Background()); err == nil {
			err = rerr
		}
		return err
	})
	return w.Run(ctx)
}

func main() {
	if len(os.Args) < 2 || (os.Args[1] != "produce" && os.Args[1] != "work") {
		fmt.Fprintln(os.Stderr, "usage: sharedstore produce|work [flags]")
		os.Exit(2)
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	url := fs.String("url", "http://127.0.0.1:7070", "chronoqd URL(s), comma-separated")
	queue := fs.String("queue", "sharedstore", "queue")
	n := fs.Int("n", 300, "produce: tasks")
	docs := fs.Int("docs", 10, "produce: documents")
	spread := fs.Duration("spread", time.Second, "produce: tasks are due over this span")
	dir := fs.String("store", "./store", "work: the shared store's directory")
	node := fs.String("node", "node", "work: this node's name")
	concurrency := fs.Int("concurrency", 4, "work: handlers at once")
	_ = fs.Parse(os.Args[2:])
	c, err := chronoq.New([]string{*url})
	if err != nil {
		log.Fatal(err)
	}
	ctx, stop := signalNotify()
	defer stop()
	if os.Args[1] == "produce" {
		err = Produce(ctx, c, *queue, *n, *docs, time.Now(), *spread)
	} else {
		err = Work(ctx, c, *queue, Store{Dir: *dir}, *node, *concurrency)
	}
	if err != nil {
		log.Fatal(err)
	}
}
