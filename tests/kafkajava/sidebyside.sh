#!/usr/bin/env bash
# make kafka-side-by-side: Apache Kafka (KRaft, one node, from Maven
# Central: broker/pom.xml) and strand dev on this machine, measured with
# the same Kafka perf tools: producer throughput and latency at full speed
# and at a fixed rate, and consumer throughput; Kafka at its default
# (flush left to the OS) and at fsync parity (flush.messages=1, each
# message fsynced before the ack, as strand dev's directory buckets do).
# Writes a markdown table to $OUT (default docs/perf/kafka-side-by-side.md).
. "$(dirname "$0")/lib.sh"
OUT="${OUT:-$root/docs/perf/kafka-side-by-side.md}"
RECORDS="${RECORDS:-200000}"
SIZE="${SIZE:-1000}"
RATE="${RATE:-2000}" # records/s of the fixed-rate run
jars "$here"
jars "$here/broker"
tools() { java -Xmx512m -cp "$here/target/lib/*" -Dorg.slf4j.simpleLogger.defaultLogLevel=warn "$@" 2>/dev/null; }

# Apache Kafka, KRaft, one node.
KB="127.0.0.1:$(free)"; KC="127.0.0.1:$(free)"
cat >"$work/server.properties" <<PROPS
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@$KC
listeners=PLAINTEXT://$KB,CONTROLLER://$KC
advertised.listeners=PLAINTEXT://$KB
controller.listener.names=CONTROLLER
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
log.dirs=$work/kafka-logs
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
group.initial.rebalance.delay.ms=0
PROPS
broker() { java -Xmx1g -cp "$here/broker/target/lib/*" -Dlog4j.configuration=file:/dev/null "$@"; }
broker kafka.tools.StorageTool format -t "$(broker kafka.tools.StorageTool random-uuid 2>/dev/null)" -c "$work/server.properties" >/dev/null 2>&1
broker kafka.Kafka "$work/server.properties" >"$work/kafka.log" 2>&1 &
pids+=($!)

start_strand

for b in "$KB" "$SB"; do
  for _ in $(seq 120); do tools org.apache.kafka.tools.TopicCommand --bootstrap-server "$b" --list >/dev/null && break; sleep 0.5; done
done
tools org.apache.kafka.tools.TopicCommand --bootstrap-server "$KB" --create --topic p-default --partitions 4 >/dev/null
tools org.apache.kafka.tools.TopicCommand --bootstrap-server "$KB" --create --topic p-fsync --partitions 4 --config flush.messages=1 >/dev/null
tools org.apache.kafka.tools.TopicCommand --bootstrap-server "$SB" --create --topic p-strand --partitions 4 >/dev/null

# produce BROKER TOPIC N THROUGHPUT: the perf test's summary fields.
produce() {
  tools org.apache.kafka.tools.ProducerPerformance --topic "$2" --num-records "$3" --record-size "$SIZE" --throughput "$4" \
    --producer-props bootstrap.servers="$1" acks=all | tail -1 |
    sed -E 's/.*sent, ([0-9.]+) records\/sec \(([0-9.]+) MB\/sec\), ([0-9.]+) ms avg latency, ([0-9.]+) ms max latency, ([0-9]+) ms 50th, ([0-9]+) ms 95th, ([0-9]+) ms 99th.*/\1 \2 \3 \5 \7 \4/'
}
consume() {
  tools org.apache.kafka.tools.ConsumerPerformance --bootstrap-server "$1" --topic "$2" --messages "$3" | tail -1 | awk -F', ' '{print $4}'
}
row() { # name broker topic
  read -r rps mbs avg p50 p99 maxl <<<"$(produce "$2" "$3" "$RECORDS" -1)"
  read -r _ _ favg fp50 fp99 fmax <<<"$(produce "$2" "$3" $((RATE * 20)) "$RATE")"
  cmbs=$(consume "$2" "$3" "$RECORDS")
  echo "| $1 | $rps | $mbs | $p50 / $p99 | $fp50 / $fp99 / $fmax | $cmbs |"
}
{
  echo "# Kafka side by side: Apache Kafka and strand dev"
  echo
  echo "$(date -u +%Y-%m-%d), $(nproc) cores shared with other work, Apache Kafka $(ls "$here/broker/target/lib" | sed -n 's/^kafka_2.13-\(.*\)\.jar$/\1/p') (KRaft, one node) and strand dev"
  echo "on the same machine; Kafka's perf tools, $RECORDS records of $SIZE bytes to 4 partitions, acks=all, one producer."
  echo "Reproduce: \`make kafka-side-by-side\` (tests/kafkajava/sidebyside.sh)."
  echo
  echo "| setup | produce rec/s | produce MB/s | latency p50 / p99 ms at full speed | latency p50 / p99 / max ms at $RATE rec/s | consume MB/s |"
  echo "| --- | --- | --- | --- | --- | --- |"
  row "Kafka, default (no fsync before the ack)" "$KB" p-default
  row "Kafka, flush.messages=1 (fsync parity)" "$KB" p-fsync
  row "strand dev (standard class: each ack after its flight is fsynced in the directory bucket)" "$SB" p-strand
} | tee "$work/table.md"
mkdir -p "$(dirname "$OUT")"
cp "$work/table.md" "$OUT"
echo "ok: written to $OUT"
