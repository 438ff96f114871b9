# ruff: noqa: E501 (the corpora below are one statement per line)
"""deltamerge parses and rewrites users' SQL with SQLGlot (``sql_dialect.DIALECT``) before Spark
runs it: whatever it writes back must mean what the user wrote. Each expression below is evaluated
by Spark as written and after the round trip; the values must be equal. The first ones are those
SQLGlot's own Spark dialect gets wrong for Spark 4 (``parse_json`` dropped, ``localtimestamp()``
without its parentheses, ``collate(x, 'name')`` as ``x COLLATE 'name'``)."""

from __future__ import annotations

import re
import zlib

import pyspark
import pytest
import sqlglot
from pyspark.errors import AnalysisException, ParseException

import deltamerge
from deltamerge import DeltaTable
from deltamerge.errors import AnalysisError, DeltaMergeError
from deltamerge.sql_dialect import DIALECT, DeltamergeSpark, DeltamergeSpark40

pytestmark = pytest.mark.spark

EXPRESSIONS = [
    "to_json(parse_json('{\"a\": [1, 2]}'))",
    "variant_get(parse_json('{\"a\": 1}'), '$.a', 'int')",
    "is_variant_null(parse_json('null'))",
    "schema_of_variant(parse_json('{\"a\": 1}'))",
    "CAST(parse_json('7') AS INT)",
    "to_json(try_parse_json('{oops'))",
    "localtimestamp() IS NOT NULL",
    "collate('a', 'UTF8_LCASE') = 'A'",
    "'a' COLLATE UTF8_LCASE = 'A'",
    "get_json_object('{\"a\": 1}', '$.a')",
    "from_json('{\"a\": 1}', 'a INT').a",
    "date_add(DATE'2020-01-31', 1)",
    "add_months(DATE'2020-01-31', 1)",
    "date_diff(DAY, DATE'2020-01-01', DATE'2020-01-31')",
    "date_format(TIMESTAMP'2020-01-02 03:04:05', 'yyyy/MM/dd HH')",
    "to_date('02/01/2020', 'dd/MM/yyyy')",
    "date_trunc('MONTH', TIMESTAMP'2020-01-02 03:04:05')",
    "timestampadd(HOUR, 1, TIMESTAMP'2020-01-01 00:00:00')",
    "TIMESTAMP'2020-01-01 00:00:00' + INTERVAL 1 DAY",
    "CAST('2020-01-01' AS TIMESTAMP_NTZ)",
    "split_part('a,b', ',', 2)",
    "regexp_extract('abc123', '([0-9]+)', 1)",
    "'abc' LIKE ANY ('a%', 'x%')",
    "overlay('hello' PLACING 'XX' FROM 2 FOR 2)",
    "decode(2, 1, 'one', 2, 'two', 'other')",
    "aggregate(array(1, 2, 3), 0, (acc, x) -> acc + x)",
    "array_sort(array(2, 1, 3), (a, b) -> b - a)",
    "transform_values(map('a', 1), (k, v) -> v + 1)['a']",
    "named_struct('a', 1, 'b', 'x').b",
    "pmod(-7, 3)",
    "7 div 2",
    "try_divide(1, 0)",
    "nvl2(NULL, 1, 2)",
    "1 <=> NULL",
    "1 IS DISTINCT FROM 2",
    "CAST(1 AS DECIMAL(10, 2))",
    "CAST(map('a', 1) AS MAP<STRING, BIGINT>)",
    "1::string",
    "xxhash64('a')",
    "trim(BOTH 'x' FROM 'xax')",
    "X'0102'",
    "to_utc_timestamp(TIMESTAMP'2020-01-01 00:00:00', 'Asia/Seoul')",
    "equal_null(1, NULL)",
    # Spark 4 reads a doubled quote in a literal as one quote; SQLGlot's Spark, as two literals
    "'it''s'",
    "'a''''b'",
    "''''",
    "'' || ''",
    '"say ""hi"""',
    '"it\'s"',
    "'a\"'",
    "\"a''b\"",
    "'a' 'b'",
    r"'it\'s'",
    r"r'a\b'",
    "'x''y' LIKE 'x''%'",
    # SQLGlot's Spark drops or changes these; deltamerge's dialect writes them as Spark 4 means them
    "instr('abcabc', 'b', 1, 2)",
    "instr('abcabc', 'b', -1, 1)",
    "levenshtein('kitten', 'sitting', 2)",
    "to_char(12454, '99G999')",
    "to_char(DATE'2016-04-08', 'y')",
    "to_char(X'537061726b', 'base64')",
    "TIME'6:30:45.887'",
    "make_timestamp(DATE'2014-12-28', TIME'6:30:45.887')",
    'CAST(parse_json(\'{"a": {"b": [1, 2]}, "c d": 3}\'):a.b[1] AS INT)',
    'CAST(parse_json(\'{"a": {"b": [1, 2]}, "c d": 3}\'):[\'c d\'] AS INT)',
    "parse_json('{\"a\": 7}'):a::int + 1",
]


# Spark 4's shift operators bind tighter than & ^ | (SQLGlot reads them at one level); >>>
# (unsigned) is unknown to SQLGlot; nested types still close with >>>; X 'F0' with a space is a
# binary literal. Each runs alone: in one SELECT after a lambda or a MAP<...> type, Spark's own
# parser refuses ``>>>``.
ALONE = [
    "-8 >>> 28",
    "4 >>> 1 + 1",
    "2 >> 1 >>> 1",
    "6 & 7 >>> 1",
    "6 & 3 >> 1",
    "1 << 2 | 1",
    "5 ^ 1 << 2",
    "CAST(array(array(array(1))) AS ARRAY<ARRAY<ARRAY<BIGINT>>>)[0][0][0]",
    "current_date() IS NOT NULL",
    "session_user() = current_user()",
    "hex(X 'F0')",
    "hex(x  'abcd') || 'x'",
    "~~5 + ~ ~6",
]

# Whole queries, as MERGE's and INSERT's source queries and CTEs are rewritten (over the views
# ``t`` and ``u`` made by the test).
QUERIES = [
    "SELECT id, explode(arr) AS e FROM t",
    "SELECT id, e FROM t LATERAL VIEW explode(arr) x AS e",
    "SELECT id, e FROM t LATERAL VIEW OUTER explode(arr) x AS e",
    "SELECT id, p, e FROM t LATERAL VIEW posexplode(arr) x AS p, e",
    "SELECT * FROM t PIVOT (sum(n) FOR v IN ('a' AS a, 'b' AS b))",
    "SELECT * FROM (SELECT id, v, n FROM t) UNPIVOT (val FOR col IN (n))",
    "SELECT id, count(*) FROM t GROUP BY ALL",
    "SELECT id, n FROM t ORDER BY ALL",
    "SELECT * EXCEPT (arr, m, st) FROM t",
    "SELECT st.* FROM t",
    "SELECT id, sum(n) FILTER (WHERE v IS NOT NULL) FROM t GROUP BY id",
    "SELECT id, first(v) IGNORE NULLS OVER (PARTITION BY id ORDER BY n ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING) FROM t",
    "SELECT id, sum(n) OVER (ORDER BY n RANGE BETWEEN 10 PRECEDING AND CURRENT ROW) FROM t",
    "SELECT id, sum(n) OVER w FROM t WINDOW w AS (PARTITION BY id ORDER BY n)",
    "SELECT id, row_number() OVER (PARTITION BY id ORDER BY n DESC NULLS LAST) AS rn FROM t",
    "SELECT * FROM t QUALIFY row_number() OVER (PARTITION BY id ORDER BY n DESC) = 1",
    "WITH x(a, b) AS (SELECT id, v FROM t) SELECT * FROM x",
    "SELECT id FROM t INTERSECT ALL SELECT id FROM u",
    "SELECT id FROM t EXCEPT ALL SELECT id FROM u",
    "SELECT id FROM t MINUS SELECT id FROM u",
    "SELECT id, w FROM u UNION ALL SELECT id, v FROM t",
    "SELECT * FROM t LEFT ANTI JOIN u ON t.id = u.id",
    "SELECT * FROM t LEFT SEMI JOIN u ON t.id = u.id",
    "SELECT * FROM t SEMI JOIN u ON t.id = u.id",
    "SELECT * FROM t ANTI JOIN u USING (id)",
    "SELECT * FROM t NATURAL JOIN u",
    "SELECT * FROM t JOIN u USING (id)",
    "SELECT * FROM t FULL OUTER JOIN u ON t.id = u.id",
    "SELECT * FROM t CROSS JOIN u",
    "SELECT t.id, x.c FROM t, LATERAL (SELECT t.n * 2 AS c) x",
    "SELECT * FROM range(3)",
    "SELECT * FROM range(1, 10, 3)",
    "SELECT inline(array(struct(1, 'a'), struct(2, 'b')))",
    "SELECT stack(2, 1, 'a', 2, 'b')",
    "SELECT * FROM t WHERE EXISTS (SELECT 1 FROM u WHERE u.id = t.id)",
    "SELECT * FROM t WHERE id IN (SELECT id FROM u)",
    "SELECT * FROM t WHERE id NOT IN (SELECT id FROM u WHERE id > 1)",
    "SELECT (SELECT max(id) FROM u) AS mx, id FROM t",
    "SELECT CASE id WHEN 1 THEN 'one' WHEN 2 THEN 'two' ELSE 'many' END FROM t",
    "SELECT arr[0], m['k'], st.x, element_at(arr, 1) FROM t WHERE size(arr) > 0",
    "SELECT id, sum(n) FROM t GROUP BY GROUPING SETS ((id), ())",
    "SELECT id, v, sum(n) FROM t GROUP BY ROLLUP (id, v)",
    "SELECT id, v, sum(n), grouping_id() FROM t GROUP BY CUBE (id, v)",
    "SELECT id, sum(n) FROM t GROUP BY id HAVING sum(n) > 15",
    "SELECT * FROM t ORDER BY n LIMIT 2 OFFSET 1",
    "SELECT /*+ BROADCAST(u) */ * FROM t JOIN u ON t.id = u.id",
    "SELECT /*+ REPARTITION(3) */ * FROM t",
    "SELECT * FROM t DISTRIBUTE BY id SORT BY n",
    "SELECT * FROM t CLUSTER BY id",
    "SELECT * FROM t TABLESAMPLE (100 PERCENT)",
    "SELECT * FROM VALUES (1, 'a'), (2, 'b') AS s(id, v)",
    "SELECT * FROM VALUES 1, 2 AS s(id)",
    "VALUES (1, 'a'), (2, 'b')",
    "SELECT * FROM (VALUES (1, 'a'), (2, 'b')) AS s(id, v)",
    "SELECT s.id FROM (VALUES (1, 'a'), (2, 'b') AS y(id, v)) s",
    "SELECT s.a FROM (VALUES (1, 'a') AS y(id, v)) AS s(a, b)",
    "SELECT transform(arr, (x, i) -> x + i) FROM t",
    "SELECT filter(arr, x -> x > 1), exists(arr, x -> x = 3), forall(arr, x -> x > 0) FROM t",
    "SELECT zip_with(arr, arr, (a, b) -> a * b) FROM t",
    "SELECT map_filter(m, (k, v) -> v > 1), transform_keys(m, (k, v) -> upper(k)) FROM t",
    "SELECT reduce(arr, 0, (acc, x) -> acc + x, acc -> acc * 10) FROM t",
    "SELECT count(DISTINCT v), approx_count_distinct(v) FROM t",
    "SELECT collect_list(v), collect_set(id), array_agg(n) FROM t",
    "SELECT percentile(n, 0.5), percentile_approx(n, 0.5), median(n) FROM t",
    "SELECT id, max_by(v, n), min_by(v, n) FROM t GROUP BY id",
    "SELECT any_value(v), first_value(v), last(v, true), bool_and(n > 0), every(n > 0), some(n > 20) FROM t",
    "SELECT count_if(n > 10), sum(n) / count(*), avg(n), stddev(n), variance(n), corr(n, id) FROM t",
    "SELECT mode(id), mode() WITHIN GROUP (ORDER BY id) FROM t",
    "SELECT id, lag(n, 1, 0) OVER (ORDER BY n), lead(n) OVER (ORDER BY n), ntile(2) OVER (ORDER BY n), percent_rank() OVER (ORDER BY n), cume_dist() OVER (ORDER BY n), dense_rank() OVER (ORDER BY id), nth_value(n, 2) OVER (ORDER BY n) FROM t",
    "SELECT struct(id, v), named_struct('a', id), array(id, n), map(coalesce(v, 'z'), id), map_from_arrays(array('a'), array(1)) FROM t",
    "SELECT to_json(st), from_json('{\"a\":1}', 'a INT'), schema_of_json('{\"a\":1}'), json_tuple('{\"a\":1,\"b\":2}', 'a', 'b') FROM t",
    "SELECT get_json_object('{\"a\":{\"b\":1}}', '$.a.b'), '{\"a\":1}' :: string",
    "SELECT id, IF(v IS NULL, 'none', v), coalesce(v, 'z'), nullif(id, 1), ifnull(v, '-'), nvl2(v, 1, 0) FROM t",
    "SELECT id DIV 2, id % 2, -id, +id, id & 3, id | 4, id ^ 1, ~id, shiftleft(id, 1), shiftright(n, 1) FROM t",
    "SELECT id << 2, n >> 1 FROM t",
    "SELECT 'a' || v, concat(v, 'x'), concat_ws('-', v, 'y'), v LIKE 'a%', v ILIKE 'A%', v RLIKE '^[ab]', v REGEXP 'c', v NOT LIKE 'b' FROM t",
    "SELECT v LIKE ALL ('a%', '%a'), v NOT LIKE ANY ('a%'), v LIKE 'a!%' ESCAPE '!' FROM t",
    "SELECT id BETWEEN 1 AND 2, id NOT BETWEEN 1 AND 2, id IN (1, 3), id NOT IN (2), v IS NULL, v IS NOT NULL, id <=> NULL, id IS DISTINCT FROM 1, id IS NOT DISTINCT FROM 1 FROM t",
    "SELECT (n > 15) IS TRUE, (n > 15) IS NOT FALSE, (v = 'a') IS UNKNOWN FROM t",
    "SELECT CAST(id AS STRING), try_cast(v AS INT), id::double, CAST('2020-01-01' AS DATE), CAST(n AS DECIMAL(10, 3)) FROM t",
    "SELECT date_add(DATE'2020-01-01', id), date_sub(DATE'2020-01-01', id), DATE'2020-01-01' + id, add_months(DATE'2020-01-31', 1), last_day(DATE'2020-02-01'), next_day(DATE'2020-01-01', 'Mon') FROM t",
    "SELECT datediff(DATE'2020-01-10', DATE'2020-01-01'), months_between(DATE'2020-03-01', DATE'2020-01-01'), date_diff(DATE'2020-01-10', DATE'2020-01-01')",
    "SELECT TIMESTAMP'2020-01-01 10:00:00' - INTERVAL 1 HOUR, TIMESTAMP'2020-01-01 10:00:00' + INTERVAL '1 2:03:04' DAY TO SECOND, CAST(INTERVAL 3 DAYS AS STRING), CAST(INTERVAL '2' MONTH AS STRING)",
    "SELECT CAST(make_interval(1, 2) AS STRING), CAST(make_dt_interval(1, 2) AS STRING), CAST(make_ym_interval(1, 2) AS STRING)",
    "SELECT year(DATE'2020-05-06'), month(DATE'2020-05-06'), day(DATE'2020-05-06'), dayofweek(DATE'2020-05-06'), weekofyear(DATE'2020-05-06'), quarter(DATE'2020-05-06'), hour(TIMESTAMP'2020-01-01 10:20:30'), minute(TIMESTAMP'2020-01-01 10:20:30'), second(TIMESTAMP'2020-01-01 10:20:30')",
    "SELECT extract(YEAR FROM DATE'2020-05-06'), extract(DOW FROM DATE'2020-05-06'), date_part('month', DATE'2020-05-06'), datepart('day', DATE'2020-05-06')",
    "SELECT date_format(TIMESTAMP'2020-01-02 03:04:05', 'yyyy-MM-dd HH:mm'), to_timestamp('2020-01-02 03:04', 'yyyy-MM-dd HH:mm'), to_date('2020/01/02', 'yyyy/MM/dd'), unix_timestamp('2020-01-01', 'yyyy-MM-dd'), from_unixtime(0, 'yyyy-MM-dd'), to_unix_timestamp('2020-01-01', 'yyyy-MM-dd')",
    "SELECT trunc(DATE'2020-05-06', 'MM'), date_trunc('HOUR', TIMESTAMP'2020-01-01 10:20:30'), from_utc_timestamp(TIMESTAMP'2020-01-01 00:00:00', 'Asia/Tokyo'), timestamp_seconds(0), timestamp_millis(0), unix_seconds(TIMESTAMP'1970-01-01 00:00:01'), unix_date(DATE'1970-01-02')",
    "SELECT substring('hello', 2, 3), substr('hello', -3), substring('hello' FROM 2 FOR 2), left('hello', 2), right('hello', 2), position('l' IN 'hello'), locate('l', 'hello', 4), instr('hello', 'l')",
    "SELECT trim('  a  '), ltrim('  a'), rtrim('a  '), trim(LEADING 'x' FROM 'xxa'), trim(TRAILING 'x' FROM 'axx'), btrim('xax', 'x'), lpad('a', 3, '0'), rpad('a', 3), repeat('ab', 2), reverse('abc'), initcap('hello world'), translate('abc', 'ab', 'xy'), replace('abc', 'b'), replace('abc', 'b', 'z'), split('a,b', ','), split('a,b,c', ',', 2), split_part('a,b', ',', 2), char_length('abc'), length('abc'), octet_length('ab'), bit_length('a')",
    "SELECT regexp_extract('abc123', '(\\\\d+)', 1), regexp_extract_all('a1b22', '(\\\\d+)', 1), regexp_replace('a1b2', '\\\\d', 'X'), regexp_count('aaa', 'a'), regexp_like('abc', 'b'), regexp_substr('abc123', '\\\\d+'), rlike('abc', 'c$')",
    "SELECT md5('a'), sha1('a'), sha2('a', 256), crc32('a'), hash('a'), xxhash64('a'), base64('a'), unbase64('YQ=='), hex(255), unhex('FF'), encode('a', 'UTF-8'), decode(encode('a', 'UTF-8'), 'UTF-8'), format_number(1234.5, 1), format_string('%s-%d', 'a', 1), printf('%05.1f', 3.14159D)",
    "SELECT round(2.5), round(-2.5), bround(2.5), round(1.2345, 2), ceil(1.2), floor(-1.2), ceiling(1.1), abs(-3), sign(-2), signum(3.0), sqrt(4), cbrt(27), pow(2, 10), power(2, 3), exp(0), ln(1), log(10, 100), log10(100), log2(8), log1p(0), mod(7, 3), pmod(-7, 3), factorial(5), greatest(1, 3, 2), least(1, 3, 2), rand(1) IS NOT NULL",
    "SELECT width_bucket(5.3, 0.2, 10.6, 5), conv('100', 2, 10), bin(13), e(), pi(), degrees(pi()), radians(180), div(7, 2), try_add(1, 2), try_subtract(5, 3), try_multiply(2, 3), try_divide(5, 0), try_mod(5, 0), try_sum(n), try_avg(n) FROM t GROUP BY ALL",
    "SELECT array_contains(arr, 1), array_distinct(array(1, 1, 2)), array_except(array(1, 2), array(2)), array_intersect(array(1, 2), array(2)), array_union(array(1), array(2)), array_join(array('a', 'b'), '-'), array_max(array(1, 3)), array_min(array(1, 3)), array_position(array(1, 3), 3), array_remove(array(1, 2), 2), array_repeat('a', 2), sort_array(array(3, 1), false), array_sort(array(3, 1)), flatten(array(array(1), array(2))), sequence(1, 5, 2), slice(array(1, 2, 3), 2, 2), arrays_overlap(array(1), array(1, 2)), arrays_zip(array(1), array('a')), size(arr), cardinality(arr), array_size(arr), array_append(arr, 9), array_prepend(arr, 0), array_compact(array(1, NULL)), array_insert(array(1, 2), 1, 0), get(arr, 0), shuffle(array(1)) IS NOT NULL FROM t",
    "SELECT map_keys(m), map_values(m), map_entries(m), map_concat(m, map('z', 9)), map_contains_key(m, 'k'), str_to_map('a:1,b:2'), element_at(m, 'k'), try_element_at(m, 'q') FROM t",
    "SELECT typeof(id), typeof(st), assert_true(true), nanvl(double('NaN'), 1.0), isnan(double('NaN')), isnull(v), isnotnull(v), equal_null(v, NULL), ifnull(NULL, 1), zeroifnull(NULL), nullifzero(0) FROM t",
    "SELECT bit_count(7), bit_get(5, 0), getbit(5, 2), bit_and(id), bit_or(id), bit_xor(id) FROM t GROUP BY ALL",
    "SELECT uuid() IS NOT NULL, monotonically_increasing_id() >= 0, spark_partition_id() >= 0, current_date() IS NOT NULL, current_timestamp() IS NOT NULL, now() IS NOT NULL",
    "SELECT * FROM t |> WHERE id > 1 |> SELECT id, n",
    "SELECT * FROM IDENTIFIER('t')",
    "SELECT count(1) FROM t WHERE v IN ('a', 'b') OR n IN (SELECT n FROM t WHERE id = 2)",
    "SELECT id, collect_list(v) OVER (PARTITION BY id) FROM t",
    "SELECT id, array_agg(DISTINCT v) FROM t GROUP BY id",
    "SELECT sum(DISTINCT n), count(DISTINCT id, v) FROM t",
    "SELECT histogram_numeric(n, 2), kurtosis(n), skewness(n), regr_slope(n, id), covar_pop(n, id), covar_samp(n, id), var_pop(n), var_samp(n), stddev_pop(n), stddev_samp(n), std(n) FROM t",
    "SELECT string_agg(v, ';') WITHIN GROUP (ORDER BY v), listagg(v) FROM t",
    "SELECT id, v FROM t ORDER BY v NULLS FIRST, id DESC",
    "SELECT DISTINCT id FROM t",
    "SELECT ALL id FROM t",
    "SELECT 1 AS `a b`, 2 AS `c``d`",
    "SELECT `id` + 1 AS `id+1` FROM t AS `my t`",
    "SELECT id FROM t WHERE v = 'it''s' OR v = \"b\"",
    "SELECT X'0A', 1e2, 1.5e-3D, 10BD, 5Y, 5S, 5L, 1.5F, 0.1, -0.0, .5",
    "SELECT 9223372036854775807, -9223372036854775808, 12345678901234567890, 1.0E308",
    "SELECT TIMESTAMP_NTZ'2020-01-01 00:00:00', TIMESTAMP_LTZ'2020-01-01 00:00:00', DATE'2020-01-01', TIMESTAMP'2020-01-01T01:02:03Z'",
    "SELECT CAST(NULL AS STRING), NULL, true, FALSE",
    "SELECT current_timezone(), current_database() IS NOT NULL, version() IS NOT NULL",
    "SELECT to_binary('abc', 'utf-8'), try_to_binary('x', 'hex'), to_number('$78.12', '$99.99'), try_to_number('x', '99'), to_varchar(78.12, '$99.99')",
    "SELECT sentences('Hi there. Bye.'), soundex('Robert'), levenshtein('kitten', 'sitting'), levenshtein('kitten', 'sitting', 2), ascii('a'), chr(97), char(98), substring_index('a.b.c', '.', 2), overlay('abcdef' PLACING 'XY' FROM 2), overlay('abcdef' PLACING 'XY' FROM 2 FOR 3), startswith('abc', 'a'), endswith('abc', 'c'), contains('abc', 'b'), find_in_set('b', 'a,b'), elt(2, 'a', 'b'), lower('AB'), lcase('AB'), upper('ab'), ucase('ab'), space(2), mask('AbC123'), luhn_check('79927398713'), is_valid_utf8('a'), make_valid_utf8('a'), validate_utf8('a'), quote('a')",
    "SELECT url_decode('a%20b'), url_encode('a b'), parse_url('http://x.com/p?q=1', 'QUERY', 'q'), try_parse_url('http://x.com', 'HOST')",
    "SELECT make_date(2020, 1, 2), make_timestamp(2020, 1, 2, 3, 4, 5.5), make_timestamp_ntz(2020, 1, 2, 3, 4, 5), try_to_timestamp('x'), to_timestamp_ntz('2020-01-01 01:02:03'), convert_timezone('UTC', 'Asia/Tokyo', TIMESTAMP_NTZ'2020-01-01 00:00:00'), dateadd(DAY, 1, DATE'2020-01-01'), timestampdiff(HOUR, TIMESTAMP'2020-01-01 00:00:00', TIMESTAMP'2020-01-02 00:00:00'), timestamp_micros(1), window(TIMESTAMP'2020-01-01 00:00:07', '5 seconds').start",
    "SELECT v, count(*) c FROM t GROUP BY 1 ORDER BY 2 DESC, 1",
    "SELECT * FROM t t1 JOIN t t2 ON t1.id = t2.id AND t1.n < t2.n",
    "SELECT t.* FROM t WHERE t.id = 1",
    "SELECT u.*, t.v FROM u LEFT JOIN t ON u.id = t.id",
    "SELECT * FROM (SELECT id AS k FROM t) sub(kk)",
    "SELECT id, SUM(n) AS total FROM t GROUP BY id ORDER BY total",
    "SELECT nvl(v, 'x') AS v, * FROM t",
    "SELECT id, n FROM t WHERE n > (SELECT avg(n) FROM t)",
    "SELECT a.id FROM t a WHERE a.n = (SELECT max(b.n) FROM t b WHERE b.id = a.id)",
    "SELECT ifnull(try_element_at(arr, 5), -1), array_size(arr) FROM t",
    "SELECT struct(id AS a, v AS b).b FROM t",
    "SELECT from_csv('1,a', 'a INT, b STRING'), to_csv(named_struct('a', 1)), schema_of_csv('1,a')",
    "SELECT to_xml(named_struct('a', 1)), from_xml('<p><a>1</a></p>', 'a INT'), xpath_int('<a><b>1</b></a>', 'a/b')",
    "SELECT bitmap_bucket_number(123), bitmap_bit_position(123), hll_sketch_estimate(hll_sketch_agg(id)) FROM t GROUP BY ALL",
    "SELECT collate('a', 'UTF8_LCASE') = 'A', 'a' COLLATE UNICODE_CI = 'A', collation('a')",
    "SELECT v:a FROM (SELECT parse_json('{\"a\": 1}') AS v)",
    "SELECT variant_get(parse_json('{\"a\": 1}'), '$.a', 'int'), is_variant_null(parse_json('null')), to_json(parse_json('[1]'))",
]


def _accepted(spark, text: str) -> bool:  # type: ignore[no-untyped-def]
    """Whether the running Spark accepts ``text``. The corpora are written for Spark 4.3, where every
    entry must run; an older Spark 4 skips the forms it does not know (TIME, QUALIFY, ``v:a``...)."""
    if tuple(int(p) for p in spark.version.split(".")[:2]) >= (4, 3):
        return True
    try:
        spark.sql(text)  # parsed and analysed, not run
        return True
    except (ParseException, AnalysisException):
        return False


def test_round_trip_keeps_the_meaning(spark) -> None:  # type: ignore[no-untyped-def]
    expressions = [e for e in EXPRESSIONS if _accepted(spark, f"SELECT {e}")]
    rewritten = [sqlglot.transpile(e, read=DIALECT, write=DIALECT)[0] for e in expressions]
    original = spark.sql("SELECT " + ", ".join(f"{e} AS c{i}" for i, e in enumerate(expressions))).collect()[
        0
    ]
    again = spark.sql("SELECT " + ", ".join(f"{e} AS c{i}" for i, e in enumerate(rewritten))).collect()[0]
    diffs = [
        (e, r, a, b) for e, r, a, b in zip(expressions, rewritten, original, again, strict=True) if a != b
    ]
    assert not diffs


@pytest.mark.parametrize("expression", ALONE)
def test_round_trip_keeps_operators_and_literals(spark, expression: str) -> None:  # type: ignore[no-untyped-def]
    rewritten = sqlglot.transpile(expression, read=DIALECT, write=DIALECT)[0]
    assert spark.sql(f"SELECT {rewritten}").first() == spark.sql(f"SELECT {expression}").first()


def test_doubled_quotes_follow_the_spark_release() -> None:
    """Spark 4.1+ reads a doubled quote in a literal as one quote; Spark 4.0 as the end of one
    literal and the start of the next, concatenated (SPARK-52545). The dialect is the installed
    release's; the round trips above check it against the running Spark."""
    texts = ["'O''Brien'", '"say ""hi"""', "'a' 'b'", "'it\\'s'"]

    def values(dialect: type) -> list[str]:
        return [sqlglot.parse_one(f"SELECT {t}", read=dialect).sql(dialect=DeltamergeSpark) for t in texts]

    assert values(DeltamergeSpark) == [
        "SELECT 'O\\'Brien'",
        "SELECT 'say \"hi\"'",
        "SELECT 'ab'",  # adjacent literals are one literal to Spark
        "SELECT 'it\\'s'",
    ]
    assert values(DeltamergeSpark40) == [
        "SELECT 'OBrien'",
        "SELECT 'say hi'",
        "SELECT 'ab'",
        "SELECT 'it\\'s'",
    ]
    # An explicit CONCAT stays a call.
    assert (
        sqlglot.parse_one("SELECT concat('a', 'b')", read=DIALECT).sql(dialect=DIALECT)
        == "SELECT CONCAT('a', 'b')"
    )
    major, minor = (int(p) for p in pyspark.__version__.split(".")[:2])
    assert DIALECT is (DeltamergeSpark if (major, minor) >= (4, 1) else DeltamergeSpark40)


def test_doubled_quotes_reach_the_table(spark, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """'O''Brien' is O'Brien in every statement deltamerge parses (it was OBrien: SQLGlot's Spark
    concatenated the two halves), in the builder's strings too."""
    if DIALECT is DeltamergeSpark40:
        pytest.skip("Spark 4.0 reads 'O''Brien' as OBrien, as deltamerge does there")
    path = str(tmp_path / "t")
    deltamerge.write(spark.createDataFrame([(1, "O'Brien"), (2, "x"), (3, "y")], "id INT, name STRING"), path)
    table = f"delta.`{path}`"
    deltamerge.sql(
        spark,
        f"MERGE INTO {table} t USING (SELECT 1 AS id, 'it''s' AS v UNION ALL SELECT 4, 'D''Arcy') s "
        "ON t.id = s.id AND t.name = 'O''Brien' "
        "WHEN MATCHED THEN UPDATE SET name = s.v || ' ''ok''' "
        "WHEN NOT MATCHED AND s.v = 'D''Arcy' THEN INSERT (id, name) VALUES (s.id, s.v || '''')",
    )
    deltamerge.sql(spark, f"UPDATE {table} SET name = 'Mc''Coy' WHERE name = 'x'")
    deltamerge.sql(spark, f"DELETE FROM {table} WHERE name = \"y\" OR name = 'it''s'")
    (
        DeltaTable.forPath(spark, path)
        .alias("t")
        .merge(spark.createDataFrame([(2,)], "id INT").alias("s"), "t.id = s.id AND t.name = 'Mc''Coy'")
        .whenMatchedUpdate(condition="t.name <> 'it''s'", set={"name": "concat(t.name, '''s')"})
        .execute()
    )
    rows = sorted(tuple(r) for r in deltamerge.read(spark, path).collect())
    assert rows == [(1, "it's 'ok'"), (2, "Mc'Coy's"), (4, "D'Arcy'")]


def _rows(spark, text: str) -> list[str]:  # type: ignore[no-untyped-def]
    # repr compares NaN with NaN and VARIANT values by their bytes
    return sorted(repr(tuple(r)) for r in spark.sql(text).collect())


def _same_text(a: str, b: str) -> bool:
    # equal up to the case of what is not quoted and the spacing around brackets and commas
    def norm(text: str) -> str:
        parts = re.split(r"('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|`[^`]*`)", text)
        spaced = "".join(p if i % 2 else re.sub(r"([(),])", r" \1 ", p.lower()) for i, p in enumerate(parts))
        return " ".join(spaced.split())

    return norm(a) == norm(b)


def test_round_trip_keeps_queries(spark) -> None:  # type: ignore[no-untyped-def]
    names = {r.viewName for r in spark.sql("SHOW VIEWS").collect()}
    assert not names & {"t", "u"}
    spark.sql(
        "CREATE TEMP VIEW t AS SELECT * FROM VALUES "
        "(1, 'a', 10, array(1, 2), map('k', 1), named_struct('x', 1, 'y', 'q')), "
        "(2, 'b', 20, array(3), map('k', 2), named_struct('x', 2, 'y', 'r')), "
        "(3, NULL, 30, array(), map(), NULL), "
        "(1, 'c', 40, NULL, NULL, named_struct('x', 3, 'y', NULL)) AS t(id, v, n, arr, m, st)"
    )
    spark.sql("CREATE TEMP VIEW u AS SELECT * FROM VALUES (1, 'x'), (2, 'y'), (5, 'z') AS u(id, w)")
    try:
        diffs = []
        for query in QUERIES:
            rewritten = sqlglot.transpile(query, read=DIALECT, write=DIALECT)[0]
            # skipped: nothing rewritten but case and spacing, or a form this Spark does not know
            if _same_text(query, rewritten) or not _accepted(spark, query):
                continue
            if _rows(spark, query) != _rows(spark, rewritten):
                diffs.append((query, rewritten))
        assert not diffs
    finally:
        spark.catalog.dropTempView("t")
        spark.catalog.dropTempView("u")


# Functions whose value changes from call to call or with the machine and session.
_VOLATILE = {
    "rand",
    "randn",
    "random",
    "uuid",
    "shuffle",
    "randstr",
    "uniform",
    "current_date",
    "current_timestamp",
    "now",
    "localtimestamp",
    "localtime",
    "current_time",
    "curdate",
    "current_timezone",
    "unix_timestamp",
    "current_user",
    "user",
    "session_user",
    "current_schema",
    "current_database",
    "current_catalog",
    "version",
    "aes_encrypt",
    "aes_decrypt",
    "try_aes_decrypt",
    "reflect",
    "java_method",
    "try_reflect",
    "monotonically_increasing_id",
    "spark_partition_id",
    "input_file_name",
}
_CHUNKS = 24


@pytest.mark.sampled
@pytest.mark.parametrize("chunk", range(_CHUNKS))
def test_round_trip_keeps_sparks_own_function_examples(spark, chunk: int) -> None:  # type: ignore[no-untyped-def]
    """Every example query of Spark's built-in functions (DESCRIBE FUNCTION EXTENDED's Examples),
    a 24th of the functions per item: after the round trip it gives the same rows, or a clear error
    where SQLGlot cannot parse it (``4 >>> 1``, ``X 'F0'`` with a space). A silent change fails."""
    jvm, session = spark._jvm, spark._jsparkSession
    catalog = session.sessionState().catalog()
    names = [r.function for r in spark.sql("SHOW FUNCTIONS").collect()]
    names = [n for n in names if zlib.crc32(n.encode()) % _CHUNKS == chunk and n not in _VOLATILE]
    checked, diffs = 0, []
    for name in names:
        info = catalog.lookupFunctionInfo(jvm.org.apache.spark.sql.catalyst.FunctionIdentifier(name))
        for match in re.finditer(r">\s*(SELECT .*?);\s*\n", info.getExamples() or "", re.S):
            query = " ".join(match.group(1).split())
            try:
                want = _rows(spark, query)
            except Exception:  # an example that needs a setting or a table of its own
                continue
            try:
                rewritten = sqlglot.transpile(query, read=DIALECT, write=DIALECT)[0]
            except (sqlglot.errors.ParseError, AnalysisError):
                continue
            try:
                got = _rows(spark, rewritten)
            except Exception as e:
                diffs.append((query, rewritten, str(e).splitlines()[0]))
                continue
            checked += 1
            if got != want:
                diffs.append((query, rewritten, want, got))
    assert not diffs
    assert checked > 0 or not names


def test_qualify_and_bare_values_in_a_merge_source(spark, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The CDC source deduplicated with QUALIFY (latest change per key) and keys from a bare
    VALUES list; with schema evolution on, a column the rewrite added (SQLGlot's Spark wraps QUALIFY
    in a subquery whose SELECT * keeps the window's value as ``_w``) would join the table."""
    if not _accepted(spark, "SELECT 1 AS k QUALIFY row_number() OVER (ORDER BY k) = 1"):
        pytest.skip(f"Spark {spark.version} has no QUALIFY")
    path = str(tmp_path / "t")
    deltamerge.write(spark.createDataFrame([(1, "a"), (2, "b")], "id INT, v STRING"), path)
    deltamerge.sql(
        spark,
        f"MERGE WITH SCHEMA EVOLUTION INTO delta.`{path}` t USING ("
        "SELECT id, v FROM VALUES (1, 'x', 1), (1, 'y', 2), (3, 'z', 1) AS c(id, v, ts) "
        "QUALIFY row_number() OVER (PARTITION BY id ORDER BY ts DESC) = 1) s "
        "ON t.id = s.id WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *",
    )
    # instr's position and occurrence arguments are Spark 4.3's
    instr, found = ("instr('abcabc', 'b', 1, 2)", "5")
    if not _accepted(spark, f"SELECT {instr}"):
        instr, found = ("instr('abcabc', 'b')", "2")
    deltamerge.sql(
        spark,
        f"MERGE INTO delta.`{path}` t USING (SELECT * FROM VALUES 2, 4 AS k(id)) s ON t.id = s.id "
        "WHEN MATCHED THEN DELETE "
        f"WHEN NOT MATCHED THEN INSERT (id, v) VALUES (s.id, {instr})",
    )
    table = deltamerge.read(spark, path)
    assert table.columns == ["id", "v"]
    assert sorted(tuple(r) for r in table.collect()) == [(1, "y"), (3, "z"), (4, found)]


def test_higher_order_exists_is_not_a_subquery(spark, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """exists(array, x -> ...) in a clause condition (SQLGlot parses it as an EXISTS) was refused
    with DELTA_UNSUPPORTED_SUBQUERY; a real EXISTS subquery still is."""
    path = str(tmp_path / "t")
    deltamerge.write(spark.createDataFrame([(1, "a"), (2, "b")], "id INT, v STRING"), path)
    source = "(SELECT * FROM VALUES (1, array(1, 5)), (2, array(2)) AS s(id, arr)) s"
    deltamerge.sql(
        spark,
        f"MERGE INTO delta.`{path}` t USING {source} ON t.id = s.id "
        "WHEN MATCHED AND exists(s.arr, x -> x > 4) THEN UPDATE SET v = 'big'",
    )
    assert sorted(tuple(r) for r in deltamerge.read(spark, path).collect()) == [(1, "big"), (2, "b")]
    with pytest.raises(AnalysisError, match="DELTA_UNSUPPORTED_SUBQUERY"):
        deltamerge.sql(
            spark,
            f"MERGE INTO delta.`{path}` t USING {source} ON t.id = s.id "
            "WHEN MATCHED AND EXISTS (SELECT 1) THEN DELETE",
        )


_WORDY = [
    "date",
    "timestamp",
    "user",
    "key",
    "value",
    "order",
    "year",
    "current_date",
    "current_timestamp",
]
# größe: Spark's parser wants non-ASCII names quoted (INVALID_IDENTIFIER), and so Delta's SQL.
_QUOTED = ["a b", "a.b", "1col", "case", "größe"]


@pytest.mark.parametrize("via", ["sql", "builder"])
def test_columns_named_like_keywords_and_functions(spark, tmp_path, via: str) -> None:  # type: ignore[no-untyped-def]
    """Column names SQLGlot reads as keywords or functions when bare (current_date was the niladic
    function: an INSERT (id, current_date) named no column), and names that need backticks."""
    names = [*_WORDY, *_QUOTED]
    ref = {n: n if n in _WORDY else f"`{n}`" for n in names}
    schema = "id INT, " + ", ".join(f"`{n}` STRING" for n in names)
    path = str(tmp_path / "t")
    mapped = {"delta.columnMapping.mode": "name"}  # Delta keeps `a b` only under column mapping
    deltamerge.write(spark.createDataFrame([(1, *("a" for _ in names))], schema), path, configuration=mapped)
    source = spark.createDataFrame([(1, *("z" for _ in names)), (2, *("w" for _ in names))], schema)
    updates = {ref[n]: f"concat(s.{ref[n]}, t.{ref[n]})" for n in names}
    inserts = {"id": "s.id", **{ref[n]: f"upper(s.{ref[n]})" for n in names}}
    if via == "sql":
        source.createOrReplaceTempView("wordy_source")
        deltamerge.sql(
            spark,
            f"MERGE INTO delta.`{path}` t USING wordy_source s ON t.id = s.id AND s.{ref['date']} IS NOT NULL "
            f"WHEN MATCHED AND t.{ref['order']} <> s.{ref['order']} THEN UPDATE SET "
            + ", ".join(f"{k} = {v}" for k, v in updates.items())
            + f" WHEN NOT MATCHED THEN INSERT ({', '.join(inserts)}) VALUES ({', '.join(inserts.values())})",
        )
        spark.catalog.dropTempView("wordy_source")
    else:
        (
            DeltaTable.forPath(spark, path).alias("t")
            .merge(source.alias("s"), f"t.id = s.id AND s.{ref['date']} IS NOT NULL")
            .whenMatchedUpdate(f"t.{ref['order']} <> s.{ref['order']}", updates)
            .whenNotMatchedInsert(values=inserts)
            .execute()
        )  # fmt: skip
    rows = sorted(tuple(r) for r in deltamerge.read(spark, path).collect())
    assert rows == [(1, *("za" for _ in names)), (2, *("W" for _ in names))]


def test_target_qualified_by_its_full_name(spark, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """An unaliased target's columns qualified by its whole name, as Spark resolves them:
    ``delta.`/p`.id`` and ``spark_catalog.default.people.id`` (they were unresolved); an alias
    hides the name, as in Spark."""
    path = str(tmp_path / "t")
    deltamerge.write(spark.createDataFrame([(1, "a", 1), (2, "b", 2)], "id INT, v STRING, w INT"), path)
    spark.createDataFrame([(1, "n", 5)], "id INT, v STRING, w INT").createOrReplaceTempView("qual_src")
    deltamerge.register_table(spark, "qual_people", path)
    try:
        deltamerge.sql(
            spark,
            f"MERGE INTO delta.`{path}` USING qual_src s ON DELTA.`{path}`.id = s.id "
            f"WHEN MATCHED THEN UPDATE SET v = concat(delta.`{path}`.v, `{path}`.v, s.v)",
        )
        deltamerge.sql(
            spark,
            "MERGE INTO spark_catalog.default.qual_people USING qual_src s "
            "ON spark_catalog.default.qual_people.id = s.id WHEN MATCHED AND Default.QUAL_PEOPLE.w > 0 "
            "THEN UPDATE SET w = default.qual_people.w + qual_people.w + s.w",
        )
        assert sorted(tuple(r) for r in deltamerge.read(spark, path).collect()) == [
            (1, "aan", 7),
            (2, "b", 2),
        ]
        with pytest.raises(AnalysisError, match="DELTA_MERGE_UNRESOLVED_EXPRESSION"):
            deltamerge.sql(
                spark,
                "MERGE INTO qual_people p USING qual_src s ON qual_people.id = s.id WHEN MATCHED THEN DELETE",
            )
    finally:
        deltamerge.unregister_table(spark, "qual_people")
        spark.catalog.dropTempView("qual_src")


def test_registered_names_with_the_session_catalog_and_time_travel(spark, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A registered name is a catalog table to the user: ``default.t`` / ``spark_catalog.default.t``
    and ``t VERSION AS OF n`` work in queries and as a MERGE source (a one-part temp view neither
    resolves the qualified name nor travels in time: TABLE_OR_VIEW_NOT_FOUND, TIME_TRAVEL)."""
    path = str(tmp_path / "t")
    deltamerge.write(spark.createDataFrame([(1, 10), (2, 20)], "id INT, v INT"), path)
    deltamerge.sql(spark, f"UPDATE delta.`{path}` SET v = v + 1")  # version 1
    deltamerge.register_table(spark, "tt_src", path)
    target = str(tmp_path / "target")
    deltamerge.write(spark.createDataFrame([(1, 0), (3, 0)], "id INT, v INT"), target)
    try:

        def first(query: str):  # type: ignore[no-untyped-def]
            return tuple(deltamerge.sql(spark, query).first())

        assert first("SELECT sum(v) FROM default.tt_src") == (32,)
        assert first("SELECT sum(v) FROM spark_catalog.default.tt_src VERSION AS OF 0") == (30,)
        assert first("SELECT sum(v) FROM tt_src VERSION AS OF 0") == (30,)
        assert first("SELECT 'default.tt_src VERSION AS OF 0'") == ("default.tt_src VERSION AS OF 0",)
        into = f"MERGE INTO delta.`{target}` t USING"
        assert first(
            f"{into} default.tt_src VERSION AS OF 0 s ON t.id = s.id "
            "WHEN MATCHED THEN UPDATE SET v = s.v WHEN NOT MATCHED THEN INSERT *"
        ) == (2, 1, 0, 1)
        assert first(
            f"{into} spark_catalog.default.tt_src ON t.id = tt_src.id WHEN MATCHED THEN UPDATE SET v = tt_src.v"
        ) == (2, 2, 0, 0)
        rows = sorted(tuple(r) for r in deltamerge.read(spark, target).collect())
        assert rows == [(1, 11), (2, 21), (3, 0)]
        with pytest.raises(Exception, match="TABLE_OR_VIEW_NOT_FOUND"):
            deltamerge.sql(spark, "SELECT * FROM default.tt_not_registered").collect()
    finally:
        deltamerge.unregister_table(spark, "tt_src")


def test_registered_names_qualify_their_columns_as_catalog_tables(spark, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """``SELECT t.id FROM default.t`` and ``SELECT default.t.id FROM t``: Spark qualifies a catalog
    table's columns by its name and by its full name; a registered name read as a DataFrame kept
    neither (UNRESOLVED_COLUMN against ``_pyspark_...``). An alias of the user's own, a sample
    clause and a subquery's outer alias are left as they were."""
    path = str(tmp_path / "t")
    deltamerge.write(spark.createDataFrame([(1, "a"), (2, "b")], "id INT, v STRING"), path)
    deltamerge.write(spark.createDataFrame([(3, "c")], "id INT, v STRING"), path, mode="append")
    deltamerge.register_table(spark, "qc_t", path)
    spark.createDataFrame([(1, "x"), (3, "y")], "id INT, w STRING").createOrReplaceTempView("qc_o")
    try:

        def rows(query: str):  # type: ignore[no-untyped-def]
            return sorted(tuple(r) for r in deltamerge.sql(spark, query).collect())

        assert rows("SELECT qc_t.id FROM default.qc_t WHERE qc_t.id > 1") == [(2,), (3,)]
        assert rows("SELECT default.qc_t.id FROM default.qc_t") == [(1,), (2,), (3,)]
        assert rows("SELECT spark_catalog.default.qc_t.id FROM spark_catalog.default.qc_t") == [
            (1,), (2,), (3,)
        ]
        assert rows("SELECT default.qc_t.* FROM qc_t WHERE qc_t.id = 1") == [(1, "a")]
        assert rows("SELECT qc_t.id FROM default.qc_t VERSION AS OF 0") == [(1,), (2,)]
        assert rows("SELECT qc_t.v FROM qc_t VERSION AS OF 0 WHERE qc_t.id = 2") == [("b",)]
        assert rows(
            "SELECT qc_t.id, qc_o.w FROM qc_o, default.qc_t WHERE qc_o.id = qc_t.id"
        ) == [(1, "x"), (3, "y")]
        assert rows(
            "SELECT qc_t.v, o.w FROM default.qc_t JOIN qc_o o ON qc_t.id = o.id"
        ) == [("a", "x"), ("c", "y")]
        assert rows("SELECT t.id FROM default.qc_t AS t WHERE t.id = 2") == [(2,)]
        assert rows("SELECT x.id FROM (SELECT * FROM default.qc_t) x WHERE x.id < 2") == [(1,)]
        assert rows("SELECT count(*) FROM default.qc_t TABLESAMPLE (100 PERCENT)") == [(3,)]
        assert rows("SELECT 'default.qc_t.id' FROM default.qc_t LIMIT 1") == [("default.qc_t.id",)]
        with pytest.raises(Exception, match="UNRESOLVED_COLUMN"):  # an alias hides the name, as in Spark
            deltamerge.sql(spark, "SELECT default.qc_t.id FROM default.qc_t t").collect()
        target = str(tmp_path / "target")
        deltamerge.write(spark.createDataFrame([(1, "-")], "id INT, v STRING"), target)
        assert tuple(
            deltamerge.sql(
                spark,
                f"MERGE INTO delta.`{target}` t USING (SELECT qc_t.id, qc_t.v FROM default.qc_t "
                "WHERE qc_t.id < 3) s ON t.id = s.id WHEN MATCHED THEN UPDATE SET * "
                "WHEN NOT MATCHED THEN INSERT *",
            ).first()
        ) == (2, 1, 0, 1)
        assert sorted(tuple(r) for r in deltamerge.read(spark, target).collect()) == [(1, "a"), (2, "b")]
    finally:
        deltamerge.unregister_table(spark, "qc_t")
        spark.catalog.dropTempView("qc_o")


def test_update_and_delete_on_a_path_resolve_its_full_name(spark, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """``UPDATE delta.`/p` SET delta.`/p`.v = ... WHERE delta.`/p`.id = ...`` and DELETE alike, as for
    MERGE (they were unresolved: UNRESOLVED_COLUMN, DELTA_MERGE_UNRESOLVED_EXPRESSION); a partition
    column so qualified still deletes by metadata."""
    path = str(tmp_path / "t")
    df = spark.createDataFrame([(i, i, i % 2) for i in range(6)], "id LONG, v LONG, p LONG")
    deltamerge.write(df, path, partition_by=["p"])
    deltamerge.sql(spark, f"UPDATE delta.`{path}` SET delta.`{path}`.v = 20 WHERE DELTA.`{path}`.id = 2")
    deltamerge.sql(spark, f"DELETE FROM delta.`{path}` WHERE `{path}`.id = 0")
    deltamerge.sql(spark, f"DELETE FROM delta.`{path}` WHERE delta.`{path}`.p = 1")
    assert sorted(tuple(r) for r in deltamerge.read(spark, path).collect()) == [(2, 20, 0), (4, 4, 0)]


def test_update_statement_sets_columns_named_like_functions(spark, tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = str(tmp_path / "t")
    schema = "id INT, current_date STRING, current_user STRING, `a b` STRING"
    rows = [(1, "a", "b", "c"), (2, "d", "e", "f")]
    deltamerge.write(
        spark.createDataFrame(rows, schema), path, configuration={"delta.columnMapping.mode": "name"}
    )
    deltamerge.sql(
        spark,
        f"UPDATE delta.`{path}` AS t SET current_date = 'x', current_user = upper(t.current_user), `a b` = 'y' WHERE id = 1",
    )
    assert sorted(tuple(r) for r in deltamerge.read(spark, path).collect()) == [
        (1, "x", "B", "y"),
        (2, "d", "e", "f"),
    ]


def test_bare_function_names_are_columns_first(spark, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """``current_date``, ``user``... written without parentheses name a column when one in scope has
    that name, as Spark resolves them, and the function otherwise (``current_date()`` is always the
    function). Both sides holding the name is ambiguous."""
    path = str(tmp_path / "t")
    schema = "id INT, current_date INT, user STRING, x STRING"
    deltamerge.write(spark.createDataFrame([(1, 0, "u1", "a"), (2, 5, "u2", "b")], schema), path)
    spark.createDataFrame([(1, "s"), (3, "n")], "id INT, v STRING").createOrReplaceTempView("bare_src")
    me, today = spark.sql("SELECT current_user(), string(current_date())").first()  # type: ignore[misc]
    try:
        deltamerge.sql(
            spark,
            f"MERGE INTO delta.`{path}` t USING bare_src s ON t.id = s.id "
            "WHEN MATCHED AND current_date = 0 AND current_date() IS NOT NULL THEN UPDATE SET "
            "current_date = current_date + 1, x = concat(user, '>', s.v) "
            # INSERT values see only the source, which has neither column: the functions
            "WHEN NOT MATCHED THEN INSERT (id, current_date, user, x) VALUES (s.id, 7, user, string(current_date)) "
            "WHEN NOT MATCHED BY SOURCE AND user = 'u2' THEN UPDATE SET x = string(4 >>> 1 + 1)",
        )
        rows = sorted(tuple(r) for r in deltamerge.read(spark, path).collect())
        days = {today, str(_today(spark))}  # the merge may run past midnight
        assert any(rows == [(1, 1, "u1", "u1>s"), (2, 5, "u2", "1"), (3, 7, me, d)] for d in days)
        (
            DeltaTable.forPath(spark, path).alias("t")
            .merge(spark.table("bare_src").alias("s"), "t.id = s.id")
            .whenMatchedUpdate("current_date = 1", {"x": "user", "user": "current_user"})
            .execute()
        )  # fmt: skip
        assert deltamerge.read(spark, path).where("id = 1").first()[2:] == (me, "u1")  # type: ignore[index]
        before = sorted(tuple(r) for r in deltamerge.read(spark, path).collect())
        spark.createDataFrame([(1, 9)], "id INT, current_date INT").createOrReplaceTempView("bare_src")
        with pytest.raises(AnalysisError, match="AMBIGUOUS_REFERENCE"):
            deltamerge.sql(
                spark,
                f"MERGE INTO delta.`{path}` t USING bare_src s ON t.id = s.id "
                "WHEN MATCHED THEN UPDATE SET x = string(current_date)",
            )
        assert sorted(tuple(r) for r in deltamerge.read(spark, path).collect()) == before
    finally:
        spark.catalog.dropTempView("bare_src")


def _today(spark):  # type: ignore[no-untyped-def]
    return spark.sql("SELECT current_date()").first()[0]  # type: ignore[index]


def test_sampled_table_as_the_merge_source(spark, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """``USING name TABLESAMPLE (...) alias``: the sample was handed to spark.table() as part of
    the name (PARSE_SYNTAX_ERROR)."""
    path = str(tmp_path / "t")
    deltamerge.write(spark.createDataFrame([(1, "a"), (2, "b")], "id INT, v STRING"), path)
    spark.createDataFrame([(1, "x"), (2, "y")], "id INT, v STRING").createOrReplaceTempView("sampled_src")
    try:
        for percent, expected in ((0, [(1, "a"), (2, "b")]), (100, [(1, "x"), (2, "y")])):
            deltamerge.sql(
                spark,
                f"MERGE INTO delta.`{path}` t USING sampled_src TABLESAMPLE ({percent} PERCENT) s "
                "ON t.id = s.id WHEN MATCHED THEN UPDATE SET v = s.v",
            )
            assert sorted(tuple(r) for r in deltamerge.read(spark, path).collect()) == expected
    finally:
        spark.catalog.dropTempView("sampled_src")


def test_parenthesised_aliased_values_as_the_merge_source(spark, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """``USING (VALUES (...) AS y(id, v)) s``: the inner alias names the columns, the outer one the
    relation, as Spark reads it (SQLGlot failed on the second alias: PARSE_SYNTAX_ERROR)."""
    path = str(tmp_path / "t")
    deltamerge.write(spark.createDataFrame([(1, "a")], "id INT, v STRING"), path)
    deltamerge.sql(
        spark,
        f"MERGE INTO delta.`{path}` t USING (VALUES (1, 'x'), (2, 'y') AS y(id, v)) s ON t.id = s.id "
        "WHEN MATCHED THEN UPDATE SET v = s.v WHEN NOT MATCHED THEN INSERT *",
    )
    assert sorted(tuple(r) for r in deltamerge.read(spark, path).collect()) == [(1, "x"), (2, "y")]


_REFUSAL_ROWS = [(1, "a"), (2, "b")]


@pytest.fixture(scope="module")
def refusal_table(spark, tmp_path_factory):  # type: ignore[no-untyped-def]
    """One table for the statements that must be refused: each leaves it at version 0 with its rows
    (a statement that wrote would fail its own test and the ones after it)."""
    path = str(tmp_path_factory.mktemp("refusals") / "t")
    deltamerge.write(spark.createDataFrame(_REFUSAL_ROWS, "id INT, v STRING"), path)
    return path


def _unchanged(spark, path: str) -> None:  # type: ignore[no-untyped-def]
    assert sorted(tuple(r) for r in deltamerge.read(spark, path).collect()) == _REFUSAL_ROWS
    assert DeltaTable.forPath(spark, path).version() == 0


@pytest.mark.parametrize(
    ("tail", "error_class"),
    [
        # Oracle's MERGE has UPDATE SET ... WHERE: SQLGlot parsed it and the WHERE was dropped, so
        # every matched row was updated.
        ("WHEN MATCHED THEN UPDATE SET v = s.v WHERE s.v < 0", "PARSE_SYNTAX_ERROR"),
        ("WHEN NOT MATCHED THEN INSERT (id, v) VALUES (s.id, s.v) WHERE s.v < 0", "PARSE_SYNTAX_ERROR"),
        ("WHEN MATCHED THEN UPDATE SET v = s.v RETURNING *", "PARSE_SYNTAX_ERROR"),
        # Databricks SQL's * EXCEPT was read as *: the excepted column was written too.
        ("WHEN MATCHED THEN UPDATE SET * EXCEPT (v)", "PARSE_SYNTAX_ERROR"),
        ("WHEN NOT MATCHED THEN INSERT * EXCEPT (v)", "PARSE_SYNTAX_ERROR"),
        ("WHEN NOT MATCHED THEN INSERT ALL", "PARSE_SYNTAX_ERROR"),  # was an AttributeError
    ],
)
def test_merge_text_outside_spark_grammar_is_refused(spark, refusal_table, tail, error_class) -> None:  # type: ignore[no-untyped-def]
    path = refusal_table
    with pytest.raises(DeltaMergeError, match=error_class) as err:
        deltamerge.sql(
            spark, f"MERGE INTO delta.`{path}` t USING (SELECT 1 AS id, 'x' AS v) s ON t.id = s.id {tail}"
        )
    assert "WHERE" not in tail or "WHEN [NOT] MATCHED AND <condition>" in str(err.value)
    _unchanged(spark, path)


@pytest.mark.parametrize(
    "statement",
    [
        "MERGE INTO {t} TABLESAMPLE (50 PERCENT) t USING (SELECT 1 AS id, 'x' AS v) s ON t.id = s.id "
        "WHEN MATCHED THEN UPDATE SET v = s.v",
        "MERGE INTO {t} AS t (a, b) USING (SELECT 1 AS id, 'x' AS v) s ON t.a = s.id "
        "WHEN MATCHED THEN UPDATE SET b = s.v",
        "MERGE INTO {t} t USING (SELECT 1 AS x, 'x' AS y) AS s (id, v) ON t.id = s.id "
        "WHEN MATCHED THEN UPDATE SET v = s.v",
        "MERGE INTO {t} t USING (VALUES (1, 'x')) AS s (id, v) ON t.id = s.id WHEN MATCHED THEN UPDATE SET *",
    ],
)
def test_target_sample_and_column_aliases_are_refused_as_spark_does(spark, refusal_table, statement) -> None:  # type: ignore[no-untyped-def]
    """Spark's parser: COLUMN_ALIASES_NOT_ALLOWED for `s(a, b)` on either side of MERGE, and no
    TABLESAMPLE on the target (it was ignored: every row of the target was merged)."""
    path = refusal_table
    expected = "PARSE_SYNTAX_ERROR" if "TABLESAMPLE" in statement else "COLUMN_ALIASES_NOT_ALLOWED"
    with pytest.raises(DeltaMergeError, match=expected):
        deltamerge.sql(spark, statement.format(t=f"delta.`{path}`"))
    _unchanged(spark, path)


@pytest.mark.parametrize(
    "statement",
    [
        # Each was run without its last part: DELETE ... LIMIT 1 deleted every row the WHERE
        # matched, a sampled DELETE or UPDATE changed the whole table, ON CONFLICT inserted anyway.
        "DELETE FROM {t} WHERE id > 0 LIMIT 1",
        "DELETE FROM {t} TABLESAMPLE (50 PERCENT)",
        "DELETE FROM {t} WHERE id = 1 RETURNING *",
        "DELETE FROM {t} VERSION AS OF 0 WHERE id = 1",
        "UPDATE {t} SET v = 'z' WHERE id > 0 LIMIT 1",
        "UPDATE {t} SET v = 'z' WHERE id > 0 ORDER BY id",
        "UPDATE {t} TABLESAMPLE (10 PERCENT) SET v = 'z'",
        "UPDATE {t} VERSION AS OF 0 SET v = 'z'",
        "INSERT INTO {t} (id, v) VALUES (1, 'z') ON CONFLICT DO NOTHING",
        "INSERT INTO {t} VALUES (3, 'z') RETURNING *",
    ],
)
def test_dml_text_outside_spark_grammar_is_refused(spark, refusal_table, statement) -> None:  # type: ignore[no-untyped-def]
    path = refusal_table
    with pytest.raises(DeltaMergeError, match="PARSE_SYNTAX_ERROR") as err:
        deltamerge.sql(spark, statement.format(t=f"delta.`{path}`"))
    assert "\x1b" not in str(err.value)
    _unchanged(spark, path)


@pytest.mark.parametrize(
    "statement",
    [
        # SQLGlot dropped a token here without an error, so each ran as the MERGE without it.
        "MERGE INTO {t} * t USING (SELECT 1 AS id) s ON t.id = s.id WHEN MATCHED THEN DELETE",
        "MERGE INTO {t} t USING (SELECT 1 AS id) s ON t.id = s.id USING src2 WHEN MATCHED THEN DELETE",
        "MERGE INTO {t} t USING (SELECT 1 AS id) s WITH (NOLOCK) ON t.id = s.id WHEN MATCHED THEN DELETE",
        "MERGE INTO {t} t USING (SELECT 1 AS id) s ON t.id = s.id WHEN MATCHED BY SOURCE THEN DELETE",
        "MERGE INTO {t} t USING (SELECT 2 AS id) s ON t.id = s.id WHEN NOT MATCHED AND THEN INSERT *",
        "UPDATE {t} * x SET v = 'z'",
        "INSERT OVERWRITE INTO {t} SELECT 5 AS id, 'e' AS v",  # was an overwrite
        "INSERT INTO {t} (id, v) SELECT , 5, 'e'",
        "INSERT INTO {t} (id, v) BY NAME SELECT 5 AS id, 'e' AS v",
    ],
)
def test_statements_spark_cannot_parse_are_refused(spark, refusal_table, statement) -> None:  # type: ignore[no-untyped-def]
    """A MERGE, UPDATE or DELETE deltamerge runs goes through Spark's parser first (classic
    sessions), so the syntax Delta takes is the syntax deltamerge takes, with Spark's errors."""
    path = refusal_table
    with pytest.raises(DeltaMergeError, match="PARSE_SYNTAX_ERROR") as err:
        deltamerge.sql(spark, statement.format(t=f"delta.`{path}`"))
    assert err.value.error_class == "PARSE_SYNTAX_ERROR"
    _unchanged(spark, path)


@pytest.mark.parametrize(
    "statement",
    [
        "INSERT INTO {t} AS t REPLACE ON t.id = s.id (SELECT 1 AS id, 'z' AS v) AS s",
        "INSERT WITH SCHEMA EVOLUTION INTO {t} SELECT 1 AS id, 'z' AS v, 2 AS w",
    ],
)
def test_spark_insert_forms_deltamerge_lacks_are_named(spark, tmp_path, statement) -> None:  # type: ignore[no-untyped-def]
    """Spark 4's INSERT ... REPLACE ON and INSERT WITH SCHEMA EVOLUTION reached Spark, which cannot
    write the table (UNSUPPORTED_INSERT.RDD_BASED). REPLACE USING runs (test_replace_on_using.py)."""
    path = str(tmp_path / "t")
    deltamerge.write(spark.createDataFrame([(1, "a")], "id INT, v STRING"), path)
    refused = r"DELTA_UNSUPPORTED_OPERATION.*not implemented by deltamerge"
    if tuple(int(x) for x in pyspark.__version__.split(".")[:2]) < (4, 2):
        refused += "|PARSE_SYNTAX_ERROR"  # the grammar of REPLACE ON / WITH SCHEMA EVOLUTION came in 4.2
    with pytest.raises(DeltaMergeError, match=refused):
        deltamerge.sql(spark, statement.format(t=f"delta.`{path}`"))
    assert DeltaTable.forPath(spark, path).version() == 0


def test_spark_parser_check_keeps_pyspark_error_reporting(spark) -> None:  # type: ignore[no-untyped-def]
    """The check quiets PySpark's query-context logger while Spark parses; creating that logger as
    a plain logging.Logger made every later PySpark error with a SQL context a TypeError
    (``Logger._log() got an unexpected keyword argument 'errorClass'``)."""
    import logging

    from pyspark.logger import PySparkLogger

    from deltamerge.sql_common import check_with_spark_parser

    logging.Logger.manager.loggerDict.pop("SQLQueryContextLogger", None)  # as in a fresh process
    check_with_spark_parser(spark, "DELETE FROM t WHERE id = 1")
    with pytest.raises(DeltaMergeError, match="PARSE_SYNTAX_ERROR"):
        check_with_spark_parser(spark, "DELETE FROM t WHERE id = 1 LIMIT 1")
    assert isinstance(logging.getLogger("SQLQueryContextLogger"), PySparkLogger)
    assert not logging.getLogger("SQLQueryContextLogger").disabled
    with pytest.raises(AnalysisException, match="TABLE_OR_VIEW_NOT_FOUND"):
        spark.sql("SELECT * FROM no_such_table_anywhere").collect()
