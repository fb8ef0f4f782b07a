#!/usr/bin/env bash
# make kafka-java: the Apache Kafka Java clients and tools (Maven Central,
# pom.xml beside this script; Java 17) against strand dev's Kafka front
# end: topic admin, console producer and consumer, a consumer group across
# a member's kill -9, and the producer and consumer perf tests. It fails on
# the first check that does not hold and writes what the tools printed to
# $OUT (default docs/perf/kafka-java.txt).
. "$(dirname "$0")/lib.sh"
OUT="${OUT:-$root/docs/perf/kafka-java.txt}"
RECORDS="${RECORDS:-200000}"
jars "$here"
start_strand
B="$SB"

kjava() { java -Xmx512m -cp "$here/target/lib/*" -Dorg.slf4j.simpleLogger.defaultLogLevel=warn "$@" 2> >(grep -v '^SLF4J' >&2); }
log() { echo "$@" | tee -a "$work/out"; }
fail() { echo "FAIL: $*" >&2; exit 1; }
kafka_version=$(ls "$here/target/lib" | sed -n 's/^kafka-clients-\(.*\)\.jar$/\1/p')
log "# Apache Kafka $kafka_version Java tools against strand dev ($(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores)"
log "# reproduce: make kafka-java"

log "## kafka-topics --create, --describe"
kjava org.apache.kafka.tools.TopicCommand --bootstrap-server "$B" --create --topic java --partitions 3 | tee -a "$work/out"
kjava org.apache.kafka.tools.TopicCommand --bootstrap-server "$B" --describe --topic java | tee -a "$work/out"

log "## kafka-console-producer, kafka-console-consumer"
printf 'one\ntwo\nthree\n' | kjava org.apache.kafka.tools.ConsoleProducer --bootstrap-server "$B" --topic java
got=$(kjava org.apache.kafka.tools.consumer.ConsoleConsumer --bootstrap-server "$B" --topic java --from-beginning --max-messages 3 --group console 2>/dev/null | sort | tr '\n' ' ')
log "consumed: $got"
[ "$got" = "one three two " ] || fail "console consumer read '$got'"

log "## a consumer group across a member's kill -9"
kjava org.apache.kafka.tools.TopicCommand --bootstrap-server "$B" --create --topic grouped --partitions 4 >/dev/null
# java itself in the background (not a function's subshell), so that
# kill -9 kills the consumer.
member() {
  java -Xmx256m -cp "$here/target/lib/*" org.apache.kafka.tools.consumer.ConsoleConsumer --bootstrap-server "$B" --topic grouped --group members \
    --consumer-property session.timeout.ms=6000 --consumer-property heartbeat.interval.ms=500 >"$work/$1.out" 2>/dev/null &
  pids+=($!)
}
member a; a=$!
member b; b=$!
sleep 8 # both joined
keyed() { seq 1 40 | sed "s/.*/k&:$1-&/" | kjava org.apache.kafka.tools.ConsoleProducer --bootstrap-server "$B" --topic grouped --property parse.key=true --property key.separator=:; }
keyed before
sleep 3
na=$(grep -c before "$work/a.out" || true); nb=$(grep -c before "$work/b.out" || true)
log "before the kill: member a read $na, member b read $nb of 40"
[ $((na + nb)) -eq 40 ] && [ "$na" -gt 0 ] && [ "$nb" -gt 0 ] || fail "the two members did not split the 40 records ($na + $nb)"
kjava org.apache.kafka.tools.consumer.group.ConsumerGroupCommand --bootstrap-server "$B" --describe --group members | tee -a "$work/out"
kill -9 "$b"
keyed after
for _ in $(seq 60); do [ "$(grep -c after "$work/a.out" || true)" -ge 40 ] && break; sleep 0.5; done
na=$(grep -c after "$work/a.out" || true)
log "after member b's kill -9: member a read $na of 40 new records"
[ "$na" -ge 40 ] || fail "the survivor read $na of the 40 records produced after the kill"
kjava org.apache.kafka.tools.consumer.group.ConsumerGroupCommand --bootstrap-server "$B" --describe --group members | tee -a "$work/out"
kill "$a"

log "## kafka-producer-perf-test: $RECORDS records of 1000 bytes, acks=all, 4 partitions"
kjava org.apache.kafka.tools.TopicCommand --bootstrap-server "$B" --create --topic perf --partitions 4 >/dev/null
kjava org.apache.kafka.tools.ProducerPerformance --topic perf --num-records "$RECORDS" --record-size 1000 --throughput -1 \
  --producer-props bootstrap.servers="$B" acks=all | tail -1 | tee -a "$work/out"
log "## kafka-consumer-perf-test"
kjava org.apache.kafka.tools.ConsumerPerformance --bootstrap-server "$B" --topic perf --messages "$RECORDS" | tee -a "$work/out"

mkdir -p "$(dirname "$OUT")"
cp "$work/out" "$OUT"
echo "ok: written to $OUT"
