package sqlite_test

import (
	"context"
	"database/sql"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/sqlite"
	"github.com/readpast/readpast/storetest"
)

// groupStatesSQL reads every group (key) that has a row or running jobs,
// with the start times (unix microseconds) of its running jobs (those
// that name it first, and those that name it after the first), in one
// statement, which SQLite runs in one read snapshot.
const groupStatesSQL = `
SELECT coalesce(g.group_key, j.group_key), g.group_key IS NOT NULL,
       coalesce(g.running, 0), coalesce(g.max_running, 1), coalesce(group_concat(j.started_at), '')
FROM readpast_groups AS g
FULL JOIN (SELECT group_key, started_at FROM readpast_jobs
           WHERE state = 'running' AND group_key IS NOT NULL
           UNION ALL
           SELECT m.value, started_at FROM readpast_jobs, json_each(readpast_jobs.more_keys) AS m
           WHERE state = 'running' AND more_keys IS NOT NULL) AS j
  ON j.group_key = g.group_key
GROUP BY 1, 2, 3, 4`

// readers holds one read-only pool per database file, so that sampling
// never takes the store's single write connection.
var readers sync.Map // path -> *sql.DB

// groupStates is storetest.Harness.Groups for SQLite.
func groupStates(ctx context.Context, st readpast.Store) ([]storetest.GroupState, error) {
	path := st.(*sqlite.Store).Path()
	db, ok := readers.Load(path)
	if !ok {
		d, err := sql.Open("sqlite", "file:"+path+"?mode=ro&_pragma=busy_timeout(5000)")
		if err != nil {
			return nil, err
		}
		db, _ = readers.LoadOrStore(path, d)
	}
	rows, err := db.(*sql.DB).QueryContext(ctx, groupStatesSQL)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []storetest.GroupState
	for rows.Next() {
		var (
			g       storetest.GroupState
			started string
		)
		if err := rows.Scan(&g.Group, &g.Row, &g.Counter, &g.Limit, &started); err != nil {
			return nil, err
		}
		for _, f := range strings.FieldsFunc(started, func(r rune) bool { return r == ',' }) {
			us, err := strconv.ParseInt(f, 10, 64)
			if err != nil {
				return nil, err
			}
			g.Started = append(g.Started, time.UnixMicro(us))
		}
		out = append(out, g)
	}
	return out, rows.Err()
}
