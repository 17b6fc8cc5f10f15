import ProximityMQTT
import Testing

/// Topic levels and Home Assistant object ids made from names.
@Suite struct MQTTTopicTests {
    @Test("topic levels and Home Assistant object ids from any name stay one level, and distinct")
    func topicLevels() {
        #expect(MQTTTopic.segment("kitchen") == "kitchen")
        #expect(MQTTTopic.segment("ibeacon:f7826da6-4fa2-4e98-8024-bc5b71e0893e:1:2") == "ibeacon:f7826da6-4fa2-4e98-8024-bc5b71e0893e:1:2")
        #expect(MQTTTopic.segment("a/b+c#d%") == "a%2Fb%2Bc%23d%25")
        #expect(MQTTTopic.segment("café") == "caf%C3%A9")
        #expect(MQTTTopic.segment("") == "%00")
        for name in ["kitchen", "a/b+c#d%", "café au lait", "", "ibeacon:x:1:2"] { #expect(MQTTTopic.name(MQTTTopic.segment(name)) == name) }
        #expect(MQTTTopic.objectID("kitchen-1_a") == "kitchen-1_a")
        #expect(MQTTTopic.objectID("kitchen/door") != MQTTTopic.objectID("kitchen door"))
        #expect(MQTTTopic.objectID("kitchen/door").hasPrefix("kitchen_door_"))
    }
}
