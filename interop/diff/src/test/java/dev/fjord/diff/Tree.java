package dev.fjord.diff;

import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.apache.fluss.rpc.messages.ApiMessage;

/**
 * A parsed Fluss message as a plain tree, so two servers' answers can be compared field by field:
 * a message becomes a sorted map from field name to value holding only the fields that are
 * <em>present</em> (proto2 {@code has*}); a repeated field becomes a list (left out when empty, as
 * on the wire); {@code bytes} become {@link Bytes}; numbers, booleans and strings stay as they are.
 *
 * <p>The fields are found by reflection on Fluss's generated classes: {@code hasX()} with {@code
 * getX()} for a singular field, {@code getXsCount()} with {@code getXAt(int)} for a repeated one.
 */
final class Tree {
    private Tree() {}

    /** Bytes with value equality and a short hex rendering. */
    record Bytes(byte[] value) {
        @Override
        public boolean equals(Object o) {
            return o instanceof Bytes b && Arrays.equals(value, b.value);
        }

        @Override
        public int hashCode() {
            return Arrays.hashCode(value);
        }

        @Override
        public String toString() {
            String hex = HexFormat.of().formatHex(value);
            return value.length <= 64
                    ? "0x" + hex
                    : "0x" + hex.substring(0, 128) + "...(" + value.length + " bytes)";
        }
    }

    static Object of(Object value) {
        if (value instanceof ApiMessage message) {
            return ofMessage(message);
        }
        if (value instanceof byte[] bytes) {
            return new Bytes(bytes);
        }
        return value;
    }

    private static Map<String, Object> ofMessage(ApiMessage message) {
        Map<String, Object> fields = new TreeMap<>();
        Class<?> type = message.getClass();
        try {
            for (Method has : type.getMethods()) {
                String name = has.getName();
                if (Modifier.isStatic(has.getModifiers()) || has.getParameterCount() != 0) {
                    continue;
                }
                if (name.startsWith("has") && has.getReturnType() == boolean.class) {
                    String field = name.substring(3);
                    if ((boolean) has.invoke(message)) {
                        Method get;
                        try {
                            get = type.getMethod("get" + field);
                        } catch (NoSuchMethodException e) {
                            get = type.getMethod("is" + field);
                        }
                        fields.put(lowerFirst(field), of(get.invoke(message)));
                    }
                } else if (name.startsWith("get")
                        && name.endsWith("Count")
                        && has.getReturnType() == int.class) {
                    String plural = name.substring(3, name.length() - "Count".length());
                    Method at;
                    try {
                        at = elementGetter(type, plural);
                    } catch (NoSuchMethodException e) {
                        continue; // a singular field named ...Count (table_count), read above
                    }
                    int count = (int) has.invoke(message);
                    if (count == 0) {
                        continue;
                    }
                    List<Object> items = new ArrayList<>(count);
                    for (int i = 0; i < count; i++) {
                        items.add(of(at.invoke(message, i)));
                    }
                    fields.put(lowerFirst(plural), items);
                }
            }
        } catch (ReflectiveOperationException e) {
            throw new IllegalStateException("cannot read " + type.getSimpleName(), e);
        }
        return fields;
    }

    /** {@code getXAt(int)} for the repeated field whose count getter is {@code getXsCount()}. */
    private static Method elementGetter(Class<?> type, String plural) throws NoSuchMethodException {
        for (String singular :
                new String[] {
                    plural,
                    plural.endsWith("s") ? plural.substring(0, plural.length() - 1) : plural,
                    plural.endsWith("es") ? plural.substring(0, plural.length() - 2) : plural,
                    plural.endsWith("ies") ? plural.substring(0, plural.length() - 3) + "y" : plural
                }) {
            try {
                return type.getMethod("get" + singular + "At", int.class);
            } catch (NoSuchMethodException e) {
                // try the next spelling
            }
        }
        throw new NoSuchMethodException(type.getSimpleName() + ".get<" + plural + ">At(int)");
    }

    private static String lowerFirst(String s) {
        return Character.toLowerCase(s.charAt(0)) + s.substring(1);
    }
}
