package eosim.driver;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.sun.tools.attach.VirtualMachine;
import java.util.Iterator;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import javax.management.MBeanAttributeInfo;
import javax.management.MBeanServerConnection;
import javax.management.ObjectName;
import javax.management.remote.JMXConnector;
import javax.management.remote.JMXConnectorFactory;
import javax.management.remote.JMXServiceURL;

/**
 * The {@code jmx} mode: a snapshot of the MBeans of running JVMs (eosim's measurements of the
 * real cluster's brokers: request metrics, handler and network idle, garbage collection).
 *
 * <p>Spec: {@code pids} ({@code {"broker-0": 1234, ...}}) and {@code patterns} (ObjectName
 * patterns such as {@code kafka.network:type=RequestMetrics,*}). Each JVM is reached through
 * the attach API ({@code VirtualMachine.attach(pid).startLocalManagementAgent()}), so the
 * brokers need no JMX port and run unchanged; the result holds, per name, per MBean, every
 * numeric attribute: {@code {"broker-0": {"kafka.network:...": {"Count": 12, "Mean": 0.4}}}}.
 */
final class JmxMode {
    private final JsonNode spec;

    JmxMode(JsonNode spec) {
        this.spec = spec;
    }

    ObjectNode run() throws Exception {
        JsonNode pids = EosimDriver.required(spec, "pids", "");
        JsonNode patterns = EosimDriver.required(spec, "patterns", "");
        ObjectNode result = EosimDriver.JSON.createObjectNode();
        for (Iterator<Map.Entry<String, JsonNode>> it = pids.fields(); it.hasNext(); ) {
            Map.Entry<String, JsonNode> e = it.next();
            result.set(e.getKey(), snapshot(e.getValue().asText(), patterns));
        }
        return result;
    }

    private static ObjectNode snapshot(String pid, JsonNode patterns) throws Exception {
        VirtualMachine vm = VirtualMachine.attach(pid);
        String address;
        try {
            address = vm.startLocalManagementAgent();
        } finally {
            vm.detach();
        }
        ObjectNode out = EosimDriver.JSON.createObjectNode();
        try (JMXConnector connector = JMXConnectorFactory.connect(new JMXServiceURL(address))) {
            MBeanServerConnection server = connector.getMBeanServerConnection();
            Set<ObjectName> names = new TreeSet<>();
            for (JsonNode pattern : patterns) {
                names.addAll(server.queryNames(new ObjectName(pattern.asText()), null));
            }
            for (ObjectName name : names) {
                ObjectNode attrs = EosimDriver.JSON.createObjectNode();
                for (MBeanAttributeInfo info : server.getMBeanInfo(name).getAttributes()) {
                    if (!info.isReadable()) {
                        continue;
                    }
                    Object value;
                    try {
                        value = server.getAttribute(name, info.getName());
                    } catch (Exception ignored) {
                        continue;
                    }
                    if (value instanceof Number number) {
                        attrs.put(info.getName(), number.doubleValue());
                    }
                }
                out.set(name.getCanonicalName(), attrs);
            }
        }
        return out;
    }
}
