// Java's own KafkaConsumer on the KIP-848 consumer group protocol (group.protocol=consumer), and Admin's
// describeConsumerGroups, for tests/kafka/proxy/test_equivalence_kip848.py. Run from source with the broker's jars
// (JEP 330, no build step):
//   java -cp "$KAFKA_HOME/libs/*" ConsumerGroupProbe.java MODE BOOTSTRAP USER PASSWORD GROUP TOPICS EXPECTED
// TOPICS is comma-separated, or "~REGEX" for a pattern subscription (consume). It prints one line per outcome, in an order that does not depend on timing:
//   consume:   one member subscribes to TOPICS and polls until EXPECTED records or its first exception:
//              "RECORDS <count>", "ERROR <simple class name>" (nothing else after an error), then, with records,
//              "COMMITTED <topic> <partition> <offset>" per partition after commitSync, read back with committed().
//   rebalance: member A joins alone, then B joins, then B leaves: "PHASE <n> <A's partition count> <B's>" once the
//              group settled in each phase (the assignor spreads 4 partitions 2+2), "DISTINCT <count>" (the distinct
//              records A and B got: a partition moved before a commit is read again), or "ERROR <simple class name>".
//   describe:  Admin.describeConsumerGroups with authorized operations (ConsumerGroupDescribe for a KIP-848 group):
//              "STATE <state> MEMBERS <n> TYPE <type>", "ASSIGNED <topic>" per assigned topic, "OPS <sorted ops>",
//              or "ERROR <simple class name of the cause>". With MEMBER_USER MEMBER_PASSWORD after EXPECTED, a member
//              (that user) first joins on TOPICS and polls until it holds EXPECTED partitions, and stays in the group
//              while USER describes it ("JOINED <partitions>" first, or "ERROR ..." for the member).
//   features:  Admin.describeFeatures: "FINALIZED <feature> <max level>" per finalized feature (GROUP, TOPICS,
//              EXPECTED unused).

import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.ExecutionException;
import java.util.regex.Pattern;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.DescribeConsumerGroupsOptions;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.acl.AclOperation;

public class ConsumerGroupProbe {
    static final long DEADLINE_MS = 45_000;
    static final Set<String> DISTINCT = new HashSet<>();

    public static void main(String[] args) throws Exception {
        String mode = args[0];
        Properties props = new Properties();
        props.put("bootstrap.servers", args[1]);
        props.put("security.protocol", "SASL_PLAINTEXT");
        props.put("sasl.mechanism", "SCRAM-SHA-256");
        props.put("sasl.jaas.config", "org.apache.kafka.common.security.scram.ScramLoginModule required username=\""
                + args[2] + "\" password=\"" + args[3] + "\";");
        String group = args[4];
        List<String> topics = Arrays.asList(args[5].split(","));
        int expected = Integer.parseInt(args[6]);
        switch (mode) {
            case "consume" -> consume(consumerProps(props, group), topics, expected);
            case "rebalance" -> rebalance(consumerProps(props, group), topics, expected);
            case "features" -> features(props);
            case "describe" -> describe(props, group, topics, expected, args.length > 8 ? args[7] : null,
                    args.length > 8 ? args[8] : null);
            default -> throw new IllegalArgumentException("unknown mode " + mode);
        }
    }

    static Properties consumerProps(Properties base, String group) {
        Properties props = new Properties();
        props.putAll(base);
        props.put("group.id", group);
        props.put("group.protocol", "consumer");
        props.put("auto.offset.reset", "earliest");
        props.put("enable.auto.commit", "false");
        props.put("key.deserializer", "org.apache.kafka.common.serialization.StringDeserializer");
        props.put("value.deserializer", "org.apache.kafka.common.serialization.StringDeserializer");
        return props;
    }

    static void consume(Properties props, List<String> topics, int expected) {
        KafkaConsumer<String, String> consumer = new KafkaConsumer<>(props);
        try {
            consumeWith(consumer, topics, expected);
        } finally {
            try {
                consumer.close();
            } catch (org.apache.kafka.common.KafkaException e) {
                // Java's KIP-848 consumer may rethrow at close the authorization error of a topic it subscribed to
                // and may not describe (its background thread saw it last), on Kafka and through the proxy alike,
                // depending on timing: the outcome is already printed, so the close's error goes to stderr only.
                System.err.println("close: " + e + (e.getCause() != null ? " caused by " + e.getCause() : ""));
            }
        }
    }

    static void consumeWith(KafkaConsumer<String, String> consumer, List<String> topics, int expected) {
        {
            if (topics.size() == 1 && topics.get(0).startsWith("~")) {
                consumer.subscribe(Pattern.compile(topics.get(0).substring(1)));
            } else {
                consumer.subscribe(topics);
            }
            int count = 0;
            Set<TopicPartition> seen = new HashSet<>();
            long deadline = System.currentTimeMillis() + DEADLINE_MS;
            try {
                while (count < expected && System.currentTimeMillis() < deadline) {
                    ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(500));
                    count += records.count();
                    records.forEach(r -> seen.add(new TopicPartition(r.topic(), r.partition())));
                }
            } catch (RuntimeException e) {
                System.out.println("ERROR " + e.getClass().getSimpleName());
                return;
            }
            System.out.println("RECORDS " + count);
            if (count == 0) {
                return;
            }
            consumer.commitSync(Duration.ofSeconds(30));
            Map<TopicPartition, OffsetAndMetadata> committed = consumer.committed(seen, Duration.ofSeconds(30));
            Set<String> lines = new TreeSet<>();
            committed.forEach((tp, offset) -> lines.add("COMMITTED " + tp.topic() + " " + tp.partition() + " "
                    + (offset == null ? "none" : offset.offset())));
            lines.forEach(System.out::println);
        }
    }

    static void rebalance(Properties props, List<String> topics, int expected) {
        Properties second = new Properties();
        second.putAll(props);
        try (KafkaConsumer<String, String> a = new KafkaConsumer<>(props)) {
            try {
                a.subscribe(topics);
                settle(List.of(a), List.of(4));
                System.out.println("PHASE 1 " + a.assignment().size() + " 0");
                try (KafkaConsumer<String, String> b = new KafkaConsumer<>(second)) {
                    b.subscribe(topics);
                    settle(List.of(a, b), List.of(2, 2));
                    System.out.println("PHASE 2 " + a.assignment().size() + " " + b.assignment().size());
                }
                settle(List.of(a), List.of(4));
                System.out.println("PHASE 3 " + a.assignment().size() + " 0");
                long deadline = System.currentTimeMillis() + DEADLINE_MS;
                while (DISTINCT.size() < expected && System.currentTimeMillis() < deadline) {
                    a.poll(Duration.ofMillis(200)).forEach(r -> DISTINCT.add(r.value()));
                }
                System.out.println("DISTINCT " + DISTINCT.size());
            } catch (RuntimeException e) {
                System.out.println("ERROR " + e.getClass().getSimpleName());
            }
        }
    }

    /** Poll every member (from this one thread) until each holds the wanted number of partitions. */
    static void settle(List<KafkaConsumer<String, String>> members, List<Integer> wanted) {
        long deadline = System.currentTimeMillis() + DEADLINE_MS;
        while (System.currentTimeMillis() < deadline) {
            List<Integer> sizes = new ArrayList<>();
            for (KafkaConsumer<String, String> member : members) {
                member.poll(Duration.ofMillis(100)).forEach(r -> DISTINCT.add(r.value()));
                sizes.add(member.assignment().size());
            }
            if (sizes.equals(wanted)) {
                return;
            }
        }
        throw new IllegalStateException("the group did not settle to " + wanted);
    }

    static void describe(Properties props, String group, List<String> topics, int partitions, String memberUser,
                         String memberPassword) throws InterruptedException {
        if (memberUser == null) {
            describeAs(props, group);
            return;
        }
        Properties member = consumerProps(props, group);
        member.put("sasl.jaas.config", "org.apache.kafka.common.security.scram.ScramLoginModule required username=\""
                + memberUser + "\" password=\"" + memberPassword + "\";");
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(member)) {
            consumer.subscribe(topics);
            try {
                settle(List.of(consumer), List.of(partitions));
            } catch (RuntimeException e) {
                System.out.println("ERROR " + e.getClass().getSimpleName());
                return;
            }
            System.out.println("JOINED " + consumer.assignment().size());
            describeAs(props, group);
        }
    }

    static void features(Properties props) throws Exception {
        try (Admin admin = Admin.create(props)) {
            Set<String> lines = new TreeSet<>();
            admin.describeFeatures().featureMetadata().get().finalizedFeatures()
                    .forEach((name, range) -> lines.add("FINALIZED " + name + " " + range.maxVersionLevel()));
            lines.forEach(System.out::println);
        }
    }

    static void describeAs(Properties props, String group) throws InterruptedException {
        try (Admin admin = Admin.create(props)) {
            ConsumerGroupDescription description;
            try {
                description = admin.describeConsumerGroups(List.of(group),
                        new DescribeConsumerGroupsOptions().includeAuthorizedOperations(true)).all().get().get(group);
            } catch (ExecutionException e) {
                System.out.println("ERROR " + e.getCause().getClass().getSimpleName());
                return;
            }
            System.out.println("STATE " + description.state() + " MEMBERS " + description.members().size()
                    + " TYPE " + description.type());
            Set<String> assigned = new TreeSet<>();
            for (MemberDescription member : description.members()) {
                member.assignment().topicPartitions().forEach(tp -> assigned.add(tp.topic()));
            }
            assigned.forEach(topic -> System.out.println("ASSIGNED " + topic));
            Set<String> ops = new TreeSet<>();
            Set<AclOperation> authorized = description.authorizedOperations();
            if (authorized != null) {
                authorized.forEach(op -> ops.add(op.name()));
            }
            System.out.println("OPS " + String.join(",", ops));
        }
    }
}
