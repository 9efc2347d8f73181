package letterbox.conformance;

/** One scenario: it returns its comparable record, or throws when it cannot run to its end. */
@FunctionalInterface
interface Scenario {
    Object run(Ctx c) throws Exception;
}
