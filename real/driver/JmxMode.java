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
 * brokers need no JMX port and run unchanged (the agent listens on the JVM's own loopback:
 * run this in its network namespace); the result holds, per name, per MBean, every numeric
 * attribute: {@code {"broker-0": {"kafka.network:...": {"Count": 12, "Mean": 0.4}}}}, and
 * {@code nano_time}. With {@code serve}, it prints one such snapshot line for each line it
 * reads on stdin, until stdin closes.
 */
final class JmxMode {
    private final JsonNode spec;

    JmxMode(JsonNode spec) {
        this.spec = spec;
    }

    ObjectNode run() throws Exception {
        JsonNode pids = EosimDriver.required(spec, "pids", "");
        JsonNode patterns = EosimDriver.required(spec, "patterns", "");
        Map<String, JMXConnector> connectors = new java.util.LinkedHashMap<>();
        try {
            for (Iterator<Map.Entry<String, JsonNode>> it = pids.fields(); it.hasNext(); ) {
                Map.Entry<String, JsonNode> e = it.next();
                connectors.put(e.getKey(), connect(e.getValue().asText()));
            }
            if (!spec.path("serve").asBoolean(false)) {
                return snapshot(connectors, patterns);
            }
            // Serve: a snapshot line on stdout for each line read on stdin, until it closes
            // (the connections stay open, so a snapshot costs the JVMs little).
            java.io.BufferedReader in = new java.io.BufferedReader(
                    new java.io.InputStreamReader(System.in, java.nio.charset.StandardCharsets.UTF_8));
            while (in.readLine() != null) {
                System.out.println(EosimDriver.JSON.writeValueAsString(
                        snapshot(connectors, patterns)));
                System.out.flush();
            }
            return EosimDriver.JSON.createObjectNode();
        } finally {
            for (JMXConnector c : connectors.values()) {
                c.close();
            }
        }
    }

    private static JMXConnector connect(String pid) throws Exception {
        VirtualMachine vm = VirtualMachine.attach(pid);
        String address;
        try {
            address = vm.startLocalManagementAgent();
        } finally {
            vm.detach();
        }
        return JMXConnectorFactory.connect(new JMXServiceURL(address));
    }

    private static ObjectNode snapshot(Map<String, JMXConnector> connectors, JsonNode patterns)
            throws Exception {
        ObjectNode result = EosimDriver.JSON.createObjectNode();
        result.put("nano_time", System.nanoTime());
        for (Map.Entry<String, JMXConnector> e : connectors.entrySet()) {
            MBeanServerConnection server = e.getValue().getMBeanServerConnection();
            ObjectNode out = snapshot(server, patterns);
            out.set("threads", threads(server));
            result.set(e.getKey(), out);
        }
        return result;
    }

    /** Each live thread's CPU time (ns) by name, summed over threads of one name. */
    private static ObjectNode threads(MBeanServerConnection server) throws Exception {
        java.lang.management.ThreadMXBean bean = java.lang.management.ManagementFactory
                .newPlatformMXBeanProxy(server, java.lang.management.ManagementFactory
                        .THREAD_MXBEAN_NAME, java.lang.management.ThreadMXBean.class);
        ObjectNode out = EosimDriver.JSON.createObjectNode();
        long[] ids = bean.getAllThreadIds();
        java.lang.management.ThreadInfo[] infos = bean.getThreadInfo(ids);
        for (int i = 0; i < ids.length; i++) {
            if (infos[i] == null) {
                continue;
            }
            long cpu = bean.getThreadCpuTime(ids[i]);
            if (cpu < 0) {
                continue;
            }
            String name = infos[i].getThreadName();
            out.put(name, out.path(name).asLong(0) + cpu);
        }
        return out;
    }

    private static ObjectNode snapshot(MBeanServerConnection server, JsonNode patterns)
            throws Exception {
        ObjectNode out = EosimDriver.JSON.createObjectNode();
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
        return out;
    }
}
