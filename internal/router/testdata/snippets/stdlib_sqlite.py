# tier: nano
# reason: nano: imports only sqlite3 (all in nano)
import sqlite3

con = sqlite3.connect(":memory:")
con.execute("create table t (x integer)")
con.executemany("insert into t values (?)", [(i,) for i in range(10)])
print(con.execute("select sum(x) from t").fetchone())
