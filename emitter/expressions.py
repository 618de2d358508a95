"""Render Catalyst expression trees (parsed from plan JSON) as short SQL-ish text.

Attributes are rendered by a caller-supplied function, so lineage can print the user's column
names (or inline the expression that defined a computed column) instead of `name#12`.
Unknown expression classes fall back to `lowercasedclass(arg, ...)`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from emitter.plan import Expr, parse_value, render_type, simple_class

MAX_DESCRIPTION = 200
ELLIPSIS = "…"

AttributeText = Callable[[Expr], str]

BINARY_OPERATORS = {
    "Add": "+",
    "Subtract": "-",
    "Multiply": "*",
    "Divide": "/",
    "IntegralDivide": "div",
    "Remainder": "%",
    "EqualTo": "=",
    "EqualNullSafe": "<=>",
    "GreaterThan": ">",
    "GreaterThanOrEqual": ">=",
    "LessThan": "<",
    "LessThanOrEqual": "<=",
    "And": "AND",
    "Or": "OR",
    "BitwiseAnd": "&",
    "BitwiseOr": "|",
    "BitwiseXor": "^",
    "Like": "LIKE",
    "RLike": "RLIKE",
    "DateAddInterval": "+",
    "TimeAdd": "+",
    "DatetimeSub": "-",
}

# Catalyst class -> Spark SQL function name, where lowercasing the class name is wrong.
FUNCTION_NAMES = {
    "DateFormatClass": "date_format",
    "ConcatWs": "concat_ws",
    "StringTrim": "trim",
    "StringTrimLeft": "ltrim",
    "StringTrimRight": "rtrim",
    "Murmur3Hash": "hash",
    "XxHash64": "xxhash64",
    "Average": "avg",
    "CollectList": "collect_list",
    "CollectSet": "collect_set",
    "StddevSamp": "stddev_samp",
    "StddevPop": "stddev_pop",
    "VarianceSamp": "var_samp",
    "VariancePop": "var_pop",
    "RowNumber": "row_number",
    "DenseRank": "dense_rank",
    "PercentRank": "percent_rank",
    "CumeDist": "cume_dist",
    "NTile": "ntile",
    "PosExplode": "posexplode",
    "CurrentTimestamp": "current_timestamp",
    "CurrentDate": "current_date",
    "DayOfMonth": "day",
    "DayOfWeek": "dayofweek",
    "DayOfYear": "dayofyear",
    "WeekOfYear": "weekofyear",
    "DateAdd": "date_add",
    "DateSub": "date_sub",
    "DateDiff": "datediff",
    "ToDate": "to_date",
    "ParseToDate": "to_date",
    "ParseToTimestamp": "to_timestamp",
    "UnixTimestamp": "unix_timestamp",
    "FromUnixTime": "from_unixtime",
    "RegExpReplace": "regexp_replace",
    "RegExpExtract": "regexp_extract",
    "StringReplace": "replace",
    "StringSplit": "split",
    "StringLocate": "locate",
    "StringInstr": "instr",
    "StringRepeat": "repeat",
    "StringLPad": "lpad",
    "StringRPad": "rpad",
    "SubstringIndex": "substring_index",
    "ArrayContains": "array_contains",
    "ElementAt": "element_at",
    "CreateArray": "array",
    "CreateMap": "map",
    "ArrayTransform": "transform",
    "ArrayFilter": "filter",
    "ArrayExists": "exists",
    "ArrayForAll": "forall",
    "ArrayAggregate": "aggregate",
    "MapFilter": "map_filter",
    "ArraySort": "array_sort",
    "SortArray": "sort_array",
    "ArrayDistinct": "array_distinct",
    "ArrayJoin": "array_join",
    "ArrayUnion": "array_union",
    "MapKeys": "map_keys",
    "MapValues": "map_values",
    "HyperLogLogPlusPlus": "approx_count_distinct",
    "ApproximatePercentile": "percentile_approx",
    "MonotonicallyIncreasingID": "monotonically_increasing_id",
    "SparkPartitionID": "spark_partition_id",
    "InputFileName": "input_file_name",
    "CurrentRow": "current row",
    "GroupingID": "grouping_id",
    "StructsToJson": "to_json",
    "JsonToStructs": "from_json",
    "GetJsonObject": "get_json_object",
    "InitCap": "initcap",
    "BitLength": "bit_length",
    "OctetLength": "octet_length",
    "MakeDate": "make_date",
    "TruncDate": "trunc",
    "TruncTimestamp": "date_trunc",
    "AddMonths": "add_months",
    "MonthsBetween": "months_between",
    "NextDay": "next_day",
    "LastDay": "last_day",
    "FormatNumber": "format_number",
    "FormatString": "format_string",
    "BRound": "bround",
    "ShiftLeft": "shiftleft",
    "ShiftRight": "shiftright",
    "UnaryPositive": "positive",
    "BoolAnd": "bool_and",
    "BoolOr": "bool_or",
    "CountIf": "count_if",
    "MaxBy": "max_by",
    "MinBy": "min_by",
    "NthValue": "nth_value",
    "ArrayPosition": "array_position",
    "ArrayRemove": "array_remove",
    "Uuid": "uuid",
    "Rand": "rand",
    "Randn": "randn",
    "TransformKeys": "transform_keys",
    "TransformValues": "transform_values",
    "ZipWith": "zip_with",
    "MapZipWith": "map_zip_with",
    "CreateNamedStruct": "named_struct",
    "ArraysZip": "arrays_zip",
    "JsonTuple": "json_tuple",
    "PythonUDTF": "udtf",
    "Sha2": "sha2",
    "Sha1": "sha1",
    "Md5": "md5",
    "Crc32": "crc32",
}

# Casts to these types inside a call or operator are almost always the analyzer's implicit
# coercions (sha1(CAST(name AS BINARY)), date_format(CAST(d AS TIMESTAMP), ...)): not printed.
IMPLICIT_CAST_TYPES = frozenset({"binary", "timestamp", "date", "double", "long", "bigint", "float", "integer"})
GROUPING_ID_NAMES = frozenset({"gid", "spark_grouping_id"})

# Wrappers the optimizer adds around a value without changing it in the user's terms.
# Empty2Null: a file write's planner wraps string partition columns so '' lands in the
# __HIVE_DEFAULT_PARTITION__ directory; the user wrote the column through unchanged.
TRANSPARENT = frozenset(
    {
        "KnownFloatingPointNormalized",
        "NormalizeNaNAndZero",
        "PromotePrecision",
        "CheckOverflow",
        "UnscaledValue",
        "MakeDecimal",
        "KnownNotNull",
        "KnownNullable",
        "OuterReference",
        "AssertNotNull",
        "ToPrettyString",
        "Empty2Null",
    }
)


def truncate(text: str, limit: int = MAX_DESCRIPTION) -> str:
    return text if len(text) <= limit else text[: limit - 1] + ELLIPSIS


def render(expr: Expr, attribute_text: AttributeText) -> str:
    """SQL-ish text of `expr`, attributes printed by `attribute_text` (full length)."""
    handler = _HANDLERS.get(expr.cls)
    if handler is not None:
        return handler(expr, attribute_text)
    parameters = replaced_parameters(expr)
    if parameters is not None:
        return _call(function_name(expr.cls), parameters, attribute_text)
    if expr.cls in BINARY_OPERATORS and len(expr.children) == 2:
        left, right = (render_argument(child, attribute_text) for child in expr.children)
        return f"({left} {BINARY_OPERATORS[expr.cls]} {right})"
    if expr.cls in TRANSPARENT and expr.children:
        return render(expr.children[0], attribute_text)
    if expr.cls == "OuterReference":
        inner = expr.field_expr("e")
        return render(inner, attribute_text) if isinstance(inner, Expr) else "outer"
    return _call(function_name(expr.cls), expr.children, attribute_text)


def replaced_parameters(expr: Expr) -> tuple[Expr, ...] | None:
    """The user's arguments of a function Spark rewrites into another (`nvl(a, b)`, whose only
    child is its replacement `coalesce(a, b)`), as analyzed plans keep them beside it; else None."""
    if expr.fields.get("replacement") != 0 or len(expr.children) != 1:
        return None
    parameters = []
    for name, value in expr.fields.items():
        if name in ("class", "num-children", "replacement"):
            continue
        parsed = parse_value(value) if isinstance(value, list) else None
        if isinstance(parsed, Expr):
            parameters.append(parsed)
    return tuple(parameters)


def function_name(cls: str) -> str:
    return FUNCTION_NAMES.get(cls, cls.lower())


def render_argument(expr: Expr, attribute_text: AttributeText) -> str:
    """An operand or argument: implicit coercion casts are left out."""
    target = str(expr.fields.get("dataType"))
    if expr.cls == "Cast" and expr.children and (target in IMPLICIT_CAST_TYPES or target.startswith("decimal")):
        return render_argument(expr.children[0], attribute_text)
    return render(expr, attribute_text)


def _call(name: str, args: tuple[Expr, ...], attribute_text: AttributeText) -> str:
    return f"{name}({', '.join(render_argument(arg, attribute_text) for arg in args)})"


def _literal(expr: Expr, _: AttributeText) -> str:
    value = expr.fields.get("value")
    data_type = expr.fields.get("dataType")
    if value is None:
        return "NULL"
    if data_type == "string":
        return "'" + str(value).replace("'", "\\'") + "'"
    if data_type in ("date", "timestamp", "timestamp_ntz"):
        return f"{str(data_type).upper()} {value}"
    return str(value)


def _attribute(expr: Expr, attribute_text: AttributeText) -> str:
    return attribute_text(expr)


def display_name(name: str) -> str:
    """Spark names some rewritten columns by their qualified source (`spark_catalog.db.t.col`)."""
    return name.rsplit(".", 1)[-1] if name.count(".") >= 2 else name


def _lambda_variable(expr: Expr, _: AttributeText) -> str:
    return str(expr.fields.get("name", "x"))


def _alias(expr: Expr, attribute_text: AttributeText) -> str:
    return render(expr.children[0], attribute_text) if expr.children else str(expr.name)


def _cast(expr: Expr, attribute_text: AttributeText) -> str:
    inner = render(expr.children[0], attribute_text) if expr.children else ""
    return f"CAST({inner} AS {render_type(expr.fields.get('dataType')).upper()})"


def _case_when(expr: Expr, attribute_text: AttributeText) -> str:
    branch_count = len(expr.fields.get("branches") or ())
    parts = ["CASE"]
    for index in range(branch_count):
        condition, value = expr.children[2 * index], expr.children[2 * index + 1]
        parts.append(f"WHEN {render(condition, attribute_text)} THEN {render(value, attribute_text)}")
    if len(expr.children) > 2 * branch_count:
        parts.append(f"ELSE {render(expr.children[-1], attribute_text)}")
    parts.append("END")
    return " ".join(parts)


def _if(expr: Expr, attribute_text: AttributeText) -> str:
    return _call("if", expr.children, attribute_text)


def _not(expr: Expr, attribute_text: AttributeText) -> str:
    return f"(NOT {render(expr.children[0], attribute_text)})"


def _is_null(expr: Expr, attribute_text: AttributeText) -> str:
    suffix = "IS NOT NULL" if expr.cls == "IsNotNull" else "IS NULL"
    return f"({render(expr.children[0], attribute_text)} {suffix})"


def _unary_minus(expr: Expr, attribute_text: AttributeText) -> str:
    return f"(- {render(expr.children[0], attribute_text)})"


def _in(expr: Expr, attribute_text: AttributeText) -> str:
    value, *options = (render(child, attribute_text) for child in expr.children)
    return f"({value} IN ({', '.join(options)}))"


def _in_set(expr: Expr, attribute_text: AttributeText) -> str:
    values = expr.fields.get("hset")
    shown = ", ".join(str(value) for value in values) if isinstance(values, list) else "..."
    return f"({render(expr.children[0], attribute_text)} IN ({shown}))"


def _aggregate_expression(expr: Expr, attribute_text: AttributeText) -> str:
    function = expr.children[0]
    args = ", ".join(render_argument(arg, attribute_text) for arg in function.children if not _is_default_arg(arg))
    if function.cls == "Count" and args == "1":
        args = "*"
    distinct = "DISTINCT " if expr.fields.get("isDistinct") else ""
    text = f"{function_name(function.cls)}({distinct}{args})"
    if len(expr.children) > 1 and not _is_grouping_id_filter(expr.children[1]):
        text += f" FILTER (WHERE {render(expr.children[1], attribute_text)})"
    return text


def _is_grouping_id_filter(condition: Expr) -> bool:
    """The `FILTER (WHERE gid = n)` Spark adds when it rewrites several DISTINCT aggregates."""
    names = {item.name for item in condition.walk() if item.cls == "AttributeReference"}
    return bool(names) and names <= GROUPING_ID_NAMES


def _is_default_arg(arg: Expr) -> bool:
    """Literal parameters Spark adds to aggregate functions (ignoreNulls flags, accuracy...)."""
    return arg.cls == "Literal" and arg.fields.get("dataType") == "boolean"


def _window_expression(expr: Expr, attribute_text: AttributeText) -> str:
    function, spec = expr.children[0], expr.children[1] if len(expr.children) > 1 else None
    text = render(function, attribute_text)
    if spec is None:
        return f"{text} OVER ()"
    return f"{text} OVER ({_window_spec(spec, attribute_text)})"


def _window_spec(spec: Expr, attribute_text: AttributeText) -> str:
    partition_count = len(spec.fields.get("partitionSpec") or ())
    order_count = len(spec.fields.get("orderSpec") or ())
    partition = spec.children[:partition_count]
    order = spec.children[partition_count : partition_count + order_count]
    parts = []
    if partition:
        parts.append("PARTITION BY " + ", ".join(render(item, attribute_text) for item in partition))
    if order:
        parts.append("ORDER BY " + ", ".join(render(item, attribute_text) for item in order))
    return " ".join(parts)


def _rank_like(expr: Expr, _: AttributeText) -> str:
    """rank()/dense_rank() carry their ORDER BY columns as children; SQL prints them in OVER."""
    return f"{function_name(expr.cls)}()"


def _offset_window(expr: Expr, attribute_text: AttributeText) -> str:
    args = [render(child, attribute_text) for child in expr.children]
    if len(args) == 3 and args[2] == "NULL":
        args = args[:2]
    return f"{function_name(expr.cls)}({', '.join(args)})"


def _sort_order(expr: Expr, attribute_text: AttributeText) -> str:
    direction = expr.fields.get("direction")
    name = simple_class(str(direction.get("object", ""))) if isinstance(direction, dict) else ""
    suffix = " DESC" if name == "Descending" else ""
    return render(expr.children[0], attribute_text) + suffix if expr.children else "?"


def _python_udf(expr: Expr, attribute_text: AttributeText) -> str:
    return _call(str(expr.fields.get("name") or "python_udf"), expr.children, attribute_text)


def _scala_udf(expr: Expr, attribute_text: AttributeText) -> str:
    return _call(str(expr.fields.get("udfName") or "scala_udf"), expr.children, attribute_text)


def _get_struct_field(expr: Expr, attribute_text: AttributeText) -> str:
    child = expr.children[0]
    name = expr.fields.get("name")
    if not isinstance(name, str):
        name = _struct_field_name(child, expr.fields.get("ordinal"))
    return f"{render(child, attribute_text)}.{name}"


def _struct_field_name(child: Expr, ordinal: Any) -> str:
    data_type = child.fields.get("dataType")
    if isinstance(data_type, dict) and isinstance(ordinal, int):
        fields = data_type.get("fields") or []
        if 0 <= ordinal < len(fields):
            return str(fields[ordinal].get("name"))
    return f"_{ordinal}"


def _get_item(expr: Expr, attribute_text: AttributeText) -> str:
    child, key = (render(item, attribute_text) for item in expr.children[:2])
    return f"{child}[{key}]"


def _lambda_function(expr: Expr, attribute_text: AttributeText) -> str:
    body, *arguments = expr.children
    names = ", ".join(render(argument, attribute_text) for argument in arguments)
    names = f"({names})" if len(arguments) != 1 else names
    return f"{names} -> {render(body, attribute_text)}"


def _scalar_subquery(expr: Expr, attribute_text: AttributeText) -> str:
    """`(SELECT <its output expression>)`, the output inlined like any computed column."""
    if expr.subplan is None or not expr.subplan.output:
        return "(SELECT ...)"
    output = expr.subplan.output[0]
    reference = Expr("AttributeReference", (), {"name": output.name, "exprId": {"id": output.expr_id}})
    return f"(SELECT {attribute_text(reference)})"


def _python_udtf(expr: Expr, attribute_text: AttributeText) -> str:
    return _call(str(expr.fields.get("name") or "python_udtf"), expr.children, attribute_text)


def _exists(expr: Expr, _: AttributeText) -> str:
    return "EXISTS (subquery)"


def _in_subquery(expr: Expr, attribute_text: AttributeText) -> str:
    values = [render(child, attribute_text) for child in expr.children if child.cls != "ListQuery"]
    return f"({', '.join(values)} IN (subquery))"


def _with(expr: Expr, attribute_text: AttributeText) -> str:
    """Spark 4's common-subexpression `With(child, defs)` (BETWEEN's rewrite): print the child
    with each CommonExpressionRef replaced by its definition. The JSON drops the ids, so a ref
    is matched to the only definition, or to the only one of its data type."""
    if not expr.children:
        return "with()"
    child, *definitions = expr.children
    values = [definition.children[0] for definition in definitions if definition.children]
    return render(_substitute(child, values), attribute_text)


def _substitute(expr: Expr, values: list[Expr]) -> Expr:
    if expr.cls == "CommonExpressionRef":
        if len(values) == 1:
            return values[0]
        typed = [value for value in values if value.fields.get("dataType") == expr.fields.get("dataType")]
        return typed[0] if len(typed) == 1 else expr
    if not expr.children:
        return expr
    return expr._replace(children=tuple(_substitute(child, values) for child in expr.children))


def _between(expr: Expr, attribute_text: AttributeText) -> str:
    if len(expr.children) == 1:  # Spark 4 keeps only its replacement (a With) as the child
        return render(expr.children[0], attribute_text)
    if len(expr.children) != 3:
        return _call("between", expr.children, attribute_text)
    value, low, high = (render_argument(child, attribute_text) for child in expr.children)
    return f"({value} BETWEEN {low} AND {high})"


def _no_arg(name: str) -> Callable[[Expr, AttributeText], str]:
    return lambda expr, _: f"{name}()"


_HANDLERS: dict[str, Callable[[Expr, AttributeText], str]] = {
    "Literal": _literal,
    "AttributeReference": _attribute,
    "NamedLambdaVariable": _lambda_variable,
    "Alias": _alias,
    "Cast": _cast,
    "AnsiCast": _cast,
    "TryCast": _cast,
    "CaseWhen": _case_when,
    "If": _if,
    "Not": _not,
    "IsNull": _is_null,
    "IsNotNull": _is_null,
    "UnaryMinus": _unary_minus,
    "In": _in,
    "InSet": _in_set,
    "AggregateExpression": _aggregate_expression,
    "WindowExpression": _window_expression,
    "Rank": _rank_like,
    "DenseRank": _rank_like,
    "PercentRank": _rank_like,
    "CumeDist": _rank_like,
    "Lag": _offset_window,
    "Lead": _offset_window,
    "SortOrder": _sort_order,
    "PythonUDF": _python_udf,
    "PythonUDAF": _python_udf,
    "ScalaUDF": _scala_udf,
    "PythonUDTF": _python_udtf,
    "GetStructField": _get_struct_field,
    "GetArrayItem": _get_item,
    "GetMapValue": _get_item,
    "LambdaFunction": _lambda_function,
    "ScalarSubquery": _scalar_subquery,
    "Exists": _exists,
    "ListQuery": _exists,
    "InSubquery": _in_subquery,
    "With": _with,
    "Between": _between,
    "CommonExpressionRef": lambda expr, _: "?",
    "CurrentTimestamp": _no_arg("current_timestamp"),
    "CurrentDate": _no_arg("current_date"),
    "Now": _no_arg("now"),
}
