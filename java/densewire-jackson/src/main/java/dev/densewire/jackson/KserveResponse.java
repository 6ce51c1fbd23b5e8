package dev.densewire.jackson;

import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.densewire.DensewireException;
import dev.densewire.DensewireException.Category;
import dev.densewire.Embeddings;
import java.util.List;
import java.util.stream.Collectors;

/**
 * A KServe v2 inference response read by {@link Kserve#decode}: its outputs in order, and the response's
 * {@code model_name}, {@code model_version} and {@code id} (null unless strings) and {@code parameters}.
 */
public record KserveResponse(String modelName, String modelVersion, String id, ObjectNode parameters,
        List<KserveOutput> outputs) {

    /** The output called {@code name}, or null. */
    public KserveOutput output(String name) {
        for (KserveOutput o : outputs) {
            if (o.name().equals(name)) {
                return o;
            }
        }
        return null;
    }

    /**
     * The tensor output {@code name} (a densewire server's is {@code embedding}) as {@link Embeddings}, with the
     * model and the quantization id.
     *
     * @throws DensewireException {@code invalid_field} on {@code outputs} when there is no such tensor output
     */
    public Embeddings embeddings(String name) {
        KserveOutput o = output(name);
        if (o == null || o.tensor() == null) {
            throw new DensewireException(Category.INVALID_FIELD, "no tensor output \"" + name + "\"; the response has "
                    + outputs.stream().map(KserveOutput::name).collect(Collectors.toList()), -1, "outputs");
        }
        return new Embeddings(o.tensor(), modelName, null, o.quantization());
    }
}
