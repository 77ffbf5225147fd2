// Records table rows (see record_row.h).
#include "tuning_db/record_row.h"

namespace kiln::tuningdb {

Record ReadRecord(const SqliteStatement& s, int first) {
  Record r;
  r.workload_key = s.ColumnText(first + 0);
  r.target_key = s.ColumnText(first + 1);
  r.space_version = static_cast<int>(s.ColumnInt(first + 2));
  r.compiler_version = s.ColumnText(first + 3);
  r.config = s.ColumnText(first + 4);
  r.median_ms = s.ColumnDouble(first + 5);
  r.p10_ms = s.ColumnDouble(first + 6);
  r.p90_ms = s.ColumnDouble(first + 7);
  r.repeats = static_cast<int>(s.ColumnInt(first + 8));
  r.error = static_cast<RecordError>(s.ColumnInt(first + 9));
  r.error_message = s.ColumnText(first + 10);
  r.worker_id = s.ColumnText(first + 11);
  r.created_unix_ms = s.ColumnInt(first + 12);
  return r;
}

}  // namespace kiln::tuningdb
