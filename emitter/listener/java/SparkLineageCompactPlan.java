// The optimized plan as the lineage engine reads it, in the shape of Catalyst's TreeNode.toJSON()
// (a pre-order list of {"class", "num-children", constructor fields...}; child fields as indexes),
// written without Spark's json4s tree and with what nothing reads left out:
//   - a CatalogTable keeps only identifier, tableType, storage, provider and partitionColumnNames
//     (its schema, statistics and properties can be most of a plan's JSON);
//   - an ExprId is only {"id": n} (no product-class, no jvmId);
//   - an attribute has no qualifier, metadata or nullable;
//   - a DataType's JSON is rendered once per instance per dump.
// Constructor parameter names are looked up once per class: from the case class's own
// productElementNames (Scala 2.13, Spark 4: no reflection), else by Scala reflection (Spark 3.5's
// Scala 2.12; 1-7 ms per class, which is most of the first dump of a plan with new node classes).
// A node or expression class that overrides jsonFields (Literal...) is serialized by that override.
// Compiled with Janino, so: no generics, no lambdas, no enhanced for.
public class SparkLineageCompactPlan {
  static final java.util.Map NAMES = new java.util.concurrent.ConcurrentHashMap();
  static final java.util.Map OWN_JSON_FIELDS = new java.util.concurrent.ConcurrentHashMap();
  static final String[] CATALOG_TABLE_KEPT = {"identifier", "tableType", "storage", "provider", "partitionColumnNames"};
  static final String[] CONVERTED_PRODUCTS = {
    "org.apache.spark.sql.catalyst.expressions.ExprId",
    "org.apache.spark.sql.types.StructField",
    "org.apache.spark.sql.catalyst.IdentifierWithDatabase",  // Spark 3.5
    "org.apache.spark.sql.catalyst.CatalystIdentifier",  // Spark 4
    "org.apache.spark.sql.catalyst.AliasIdentifier",
    "org.apache.spark.sql.catalyst.plans.JoinType",
    "org.apache.spark.sql.catalyst.catalog.BucketSpec",
    "org.apache.spark.sql.catalyst.catalog.CatalogTable",
    "org.apache.spark.sql.catalyst.plans.physical.Partitioning",
    "org.apache.spark.sql.catalyst.catalog.FunctionResource",
    "org.apache.spark.sql.catalyst.plans.physical.BroadcastMode",
    "org.apache.spark.sql.catalyst.catalog.CatalogTableType",
    "org.apache.spark.sql.catalyst.catalog.CatalogStorageFormat",
  };
  static Class[] convertedProducts;
  static Class treeNodeClass;
  static Class catalogTableClass;
  static Class partitioningClass;
  static Class attributeClass;
  static Class attributeReferenceClass;
  static java.lang.reflect.Method parameterNames;
  static java.lang.reflect.Method productElementNames;  // Scala 2.13's Product.productElementNames

  java.util.IdentityHashMap dataTypes = new java.util.IdentityHashMap();
  StringBuilder out = new StringBuilder(1 << 16);
  int maxFields;

  public static String json(org.apache.spark.sql.catalyst.trees.TreeNode plan) throws Exception {
    SparkLineageCompactPlan writer = new SparkLineageCompactPlan();
    init();
    writer.maxFields = org.apache.spark.sql.internal.SQLConf.get().maxToStringFields();
    writer.tree(plan);
    return writer.out.toString();
  }

  static synchronized void init() throws Exception {
    if (treeNodeClass != null) return;
    ClassLoader loader = SparkLineageCompactPlan.class.getClassLoader();
    java.util.List found = new java.util.ArrayList();
    for (int i = 0; i < CONVERTED_PRODUCTS.length; i++) {
      try { found.add(Class.forName(CONVERTED_PRODUCTS[i], false, loader)); } catch (ClassNotFoundException missing) { }
    }
    convertedProducts = (Class[]) found.toArray(new Class[0]);
    catalogTableClass = Class.forName("org.apache.spark.sql.catalyst.catalog.CatalogTable", false, loader);
    partitioningClass = Class.forName("org.apache.spark.sql.catalyst.plans.physical.Partitioning", false, loader);
    parameterNames = Class.forName("org.apache.spark.sql.catalyst.ScalaReflection", true, loader)
        .getMethod("getConstructorParameterNames", new Class[] {Class.class});
    attributeClass = Class.forName("org.apache.spark.sql.catalyst.expressions.Attribute", false, loader);
    attributeReferenceClass = Class.forName("org.apache.spark.sql.catalyst.expressions.AttributeReference", false, loader);
    try {
      productElementNames = scala.Product.class.getMethod("productElementNames", new Class[0]);
    } catch (NoSuchMethodException scala212) { }
    treeNodeClass = Class.forName("org.apache.spark.sql.catalyst.trees.TreeNode", false, loader);
  }

  static String[] names(scala.Product instance) throws Exception {
    Class type = instance.getClass();
    String[] cached = (String[]) NAMES.get(type);
    if (cached != null) return cached;
    String[] result = elementNames(instance);
    if (result == null) {
      scala.collection.Iterable names = (scala.collection.Iterable) parameterNames.invoke(null, new Object[] {type});
      result = strings(names.iterator());
    }
    NAMES.put(type, result);
    return result;
  }

  // a case class's constructor parameter names as its generated productElementName gives them;
  // null without Scala 2.13, when one is unnamed (not a case class), or when the constructor has
  // a second parameter list (AttributeReference's exprId, qualifier), which only reflection names
  static String[] elementNames(scala.Product instance) throws Exception {
    if (productElementNames == null) return null;
    String[] names = strings((scala.collection.Iterator) productElementNames.invoke(instance, new Object[0]));
    for (int i = 0; i < names.length; i++) if (names[i].length() == 0) return null;
    java.lang.reflect.Constructor[] constructors = instance.getClass().getDeclaredConstructors();
    int parameters = 0;
    for (int i = 0; i < constructors.length; i++) parameters = Math.max(parameters, constructors[i].getParameterCount());
    return parameters == names.length ? names : null;
  }

  static String[] strings(scala.collection.Iterator iterator) {
    java.util.List list = new java.util.ArrayList();
    while (iterator.hasNext()) list.add(String.valueOf(iterator.next()));
    return (String[]) list.toArray(new String[0]);
  }

  // the class's own jsonFields() when it overrides TreeNode's, else null
  static java.lang.reflect.Method ownJsonFields(Class type) {
    Object cached = OWN_JSON_FIELDS.get(type);
    if (cached == null) {
      cached = Boolean.FALSE;
      for (Class c = type; c != null && c != treeNodeClass; c = c.getSuperclass()) {
        try {
          java.lang.reflect.Method method = c.getDeclaredMethod("jsonFields", new Class[0]);
          method.setAccessible(true);
          cached = method;
          break;
        } catch (NoSuchMethodException notHere) { }
      }
      OWN_JSON_FIELDS.put(type, cached);
    }
    return cached instanceof java.lang.reflect.Method ? (java.lang.reflect.Method) cached : null;
  }

  void tree(org.apache.spark.sql.catalyst.trees.TreeNode root) throws Exception {
    out.append('[');
    java.util.ArrayDeque pending = new java.util.ArrayDeque();
    pending.push(root);
    boolean first = true;
    while (!pending.isEmpty()) {
      org.apache.spark.sql.catalyst.trees.TreeNode node = (org.apache.spark.sql.catalyst.trees.TreeNode) pending.pop();
      if (!first) out.append(',');
      first = false;
      java.util.List children = list(node.children());
      node(node, children);
      for (int i = children.size() - 1; i >= 0; i--) pending.push(children.get(i));
    }
    out.append(']');
  }

  static java.util.List list(Object scalaIterable) {
    java.util.List list = new java.util.ArrayList();
    scala.collection.Iterator iterator = ((scala.collection.Iterable) scalaIterable).iterator();
    while (iterator.hasNext()) list.add(iterator.next());
    return list;
  }

  // by identity: a field names one of the node's own child objects (equals would take a
  // structurally equal sibling, e.g. the left side for the right of a self-join of equal subplans)
  static int indexOf(java.util.List children, Object value) {
    for (int i = 0; i < children.size(); i++) if (children.get(i) == value) return i;
    return -1;
  }

  void node(org.apache.spark.sql.catalyst.trees.TreeNode node, java.util.List children) throws Exception {
    if (node.getClass() == attributeReferenceClass) {  // most nodes of a plan: written directly, as below would
      attributeReference((org.apache.spark.sql.catalyst.expressions.AttributeReference) node);
      return;
    }
    out.append("{\"class\":");
    str(node.getClass().getName());
    out.append(",\"num-children\":").append(children.size());
    java.lang.reflect.Method own = ownJsonFields(node.getClass());
    if (own != null) {
      scala.collection.Iterator fields = ((scala.collection.Iterable) own.invoke(node, new Object[0])).iterator();
      while (fields.hasNext()) {
        scala.Tuple2 field = (scala.Tuple2) fields.next();
        jvalueField((String) field._1(), field._2());
      }
      out.append('}');
      return;
    }
    String[] names = names(node);
    java.util.List values = new java.util.ArrayList();
    scala.collection.Iterator elements = node.productIterator();
    while (elements.hasNext()) values.add(elements.next());
    values.addAll(list(node.otherCopyArgs()));
    boolean attribute = attributeClass.isInstance(node);
    for (int i = 0; i < names.length && i < values.size(); i++) {
      Object value = values.get(i);
      if (attribute && (names[i].equals("qualifier") || names[i].equals("metadata") || names[i].equals("nullable"))) continue;
      if (value instanceof scala.Option && ((scala.Option) value).isEmpty()) continue;  // json4s drops None
      out.append(",\"").append(names[i]).append("\":");
      int index = value instanceof org.apache.spark.sql.catalyst.trees.TreeNode ? indexOf(children, value) : -1;
      if (index >= 0) {
        out.append(index);
      } else if (value instanceof scala.collection.Seq && allChildren(children, (scala.collection.Seq) value)) {
        java.util.List items = list(value);
        out.append('[');
        for (int j = 0; j < items.size(); j++) { if (j > 0) out.append(','); out.append(indexOf(children, items.get(j))); }
        out.append(']');
      } else {
        value(value);
      }
    }
    out.append('}');
  }

  // what node() writes for an AttributeReference (constructor fields name, dataType, nullable,
  // metadata, then exprId, qualifier; nullable, metadata and qualifier left out), without reflection
  void attributeReference(org.apache.spark.sql.catalyst.expressions.AttributeReference attribute) throws Exception {
    out.append("{\"class\":");
    str(attributeReferenceClass.getName());
    out.append(",\"num-children\":0,\"name\":");
    str(attribute.name());
    out.append(",\"dataType\":");
    dataType(attribute.dataType());
    out.append(",\"exprId\":{\"id\":").append(attribute.exprId().id()).append("}}");
  }

  static boolean allChildren(java.util.List children, scala.collection.Seq seq) {
    scala.collection.Iterator iterator = seq.iterator();
    while (iterator.hasNext()) if (indexOf(children, iterator.next()) < 0) return false;
    return true;
  }

  // TreeNode.parseToJson, case by case in the same order
  void value(Object value) throws Exception {
    if (value == null) { out.append("null"); return; }
    if (value instanceof Boolean || value instanceof Integer || value instanceof Long
        || value instanceof Short || value instanceof Byte) { out.append(value); return; }
    if (value instanceof Float || value instanceof Double) { number(((Number) value).doubleValue()); return; }
    if (value instanceof scala.math.BigInt) { out.append(value); return; }
    if (value instanceof String) { str((String) value); return; }
    if (value instanceof java.util.UUID) { str(value.toString()); return; }
    if (value instanceof org.apache.spark.sql.types.DataType) { dataType((org.apache.spark.sql.types.DataType) value); return; }
    if (value instanceof org.apache.spark.sql.types.Metadata) { out.append("{}"); return; }
    if (value instanceof Class) { str(((Class) value).getName()); return; }
    if (value instanceof org.apache.spark.storage.StorageLevel) {
      org.apache.spark.storage.StorageLevel level = (org.apache.spark.storage.StorageLevel) value;
      out.append("{\"useDisk\":").append(level.useDisk()).append(",\"useMemory\":").append(level.useMemory())
          .append(",\"useOffHeap\":").append(level.useOffHeap()).append(",\"deserialized\":").append(level.deserialized())
          .append(",\"replication\":").append(level.replication()).append('}');
      return;
    }
    if (value instanceof org.apache.spark.sql.catalyst.trees.TreeNode) { tree((org.apache.spark.sql.catalyst.trees.TreeNode) value); return; }
    if (value instanceof scala.Option) {
      scala.Option option = (scala.Option) value;
      if (option.isDefined()) value(option.get()); else out.append("null");
      return;
    }
    if (value instanceof scala.collection.Seq) { seq((scala.collection.Seq) value); return; }
    if (value instanceof scala.collection.Map) { out.append("null"); return; }
    if (value.getClass().getName().endsWith("$")) {
      out.append("{\"object\":");
      str(value.getClass().getName());
      out.append('}');
      return;
    }
    if (value instanceof scala.Product && converted((scala.Product) value)) { product((scala.Product) value); return; }
    out.append("null");
  }

  void seq(scala.collection.Seq seq) throws Exception {
    java.util.List items = list(seq);
    if (allOf(items, partitioningClass) || allOf(items, org.apache.spark.sql.types.DataType.class) || allOf(items, scala.Product.class)) {
      out.append('[');
      for (int i = 0; i < items.size(); i++) { if (i > 0) out.append(','); value(items.get(i)); }
      out.append(']');
    } else if (items.get(0) instanceof String) {
      truncated(items);
    } else {
      out.append("null");
    }
  }

  // Spark's truncatedString(seq, "[", ", ", "]", maxToStringFields)
  void truncated(java.util.List items) {
    StringBuilder text = new StringBuilder("[");
    int shown = items.size() > maxFields ? Math.max(0, maxFields - 1) : items.size();
    for (int i = 0; i < shown; i++) { if (i > 0) text.append(", "); text.append(items.get(i)); }
    if (shown < items.size()) text.append(", ... ").append(items.size() - shown).append(" more fields");
    str(text.append(']').toString());
  }

  static boolean allOf(java.util.List items, Class type) {
    for (int i = 0; i < items.size(); i++) if (!type.isInstance(items.get(i))) return false;
    return true;
  }

  static boolean converted(scala.Product value) {
    for (int i = 0; i < convertedProducts.length; i++) if (convertedProducts[i].isInstance(value)) return true;
    scala.collection.Iterator elements = value.productIterator();  // tuples of expressions (CaseWhen branches...)
    while (elements.hasNext()) if (elements.next() instanceof org.apache.spark.sql.catalyst.trees.TreeNode) return true;
    return false;
  }

  void product(scala.Product product) throws Exception {
    if (product instanceof org.apache.spark.sql.catalyst.expressions.ExprId) {
      out.append("{\"id\":").append(((org.apache.spark.sql.catalyst.expressions.ExprId) product).id()).append('}');
      return;
    }
    int mark = out.length();
    try {
      String[] names = names(product);
      Object[] values = new Object[names.length];
      if (product.productArity() == names.length) {
        for (int i = 0; i < names.length; i++) values[i] = product.productElement(i);
      } else {
        for (int i = 0; i < names.length; i++) {
          java.lang.reflect.Field field = product.getClass().getDeclaredField(names[i]);
          field.setAccessible(true);
          values[i] = field.get(product);
        }
      }
      boolean catalogTable = catalogTableClass.isInstance(product);
      out.append("{\"product-class\":");
      str(product.getClass().getName());
      for (int i = 0; i < names.length; i++) {
        if (catalogTable && !kept(names[i])) continue;
        if (values[i] instanceof scala.Option && ((scala.Option) values[i]).isEmpty()) continue;  // json4s drops None
        out.append(",\"").append(names[i]).append("\":");
        value(values[i]);
      }
      out.append('}');
    } catch (RuntimeException error) {
      out.setLength(mark);
      out.append("null");
    } catch (ReflectiveOperationException error) {
      out.setLength(mark);
      out.append("null");
    }
  }

  static boolean kept(String name) {
    for (int i = 0; i < CATALOG_TABLE_KEPT.length; i++) if (CATALOG_TABLE_KEPT[i].equals(name)) return true;
    return false;
  }

  void dataType(org.apache.spark.sql.types.DataType type) {
    String json = (String) dataTypes.get(type);
    if (json == null) {
      json = type.json();
      dataTypes.put(type, json);
    }
    out.append(json);
  }

  // a json4s value from an overriding jsonFields(), written as json4s' compact render would; by
  // class name, since json4s moved these classes between the versions Spark 3.5 and 4 ship
  void jvalueField(String name, Object jvalue) throws Exception {
    if (jvalue.getClass().getSimpleName().equals("JNothing$")) return;
    out.append(",\"").append(name).append("\":");
    jvalue(jvalue);
  }

  void jvalue(Object jvalue) throws Exception {
    String kind = jvalue.getClass().getSimpleName();
    if (kind.equals("JNull$") || kind.equals("JNothing$")) { out.append("null"); return; }
    Object inner = ((scala.Product) jvalue).productElement(0);
    if (kind.equals("JString")) { str((String) inner); return; }
    if (kind.equals("JDouble")) { number(((Double) inner).doubleValue()); return; }
    if (kind.equals("JArray") || kind.equals("JSet")) {
      java.util.List items = list(inner);
      out.append('[');
      for (int i = 0; i < items.size(); i++) { if (i > 0) out.append(','); jvalue(items.get(i)); }
      out.append(']');
      return;
    }
    if (kind.equals("JObject")) {
      java.util.List fields = list(inner);
      out.append('{');
      boolean first = true;
      for (int i = 0; i < fields.size(); i++) {
        scala.Tuple2 field = (scala.Tuple2) fields.get(i);
        if (field._2().getClass().getSimpleName().equals("JNothing$")) continue;
        if (!first) out.append(',');
        first = false;
        str((String) field._1());
        out.append(':');
        jvalue(field._2());
      }
      out.append('}');
      return;
    }
    out.append(inner);  // JInt, JLong, JDecimal, JBool
  }

  void number(double value) {
    if (Double.isNaN(value) || Double.isInfinite(value)) { out.append("null"); return; }
    out.append(value);
  }

  void str(String s) {
    SparkLineageResult.jsonString(out, s);
  }
}
